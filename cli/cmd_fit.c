/* `jitfit fit MODEL DATA [options]`: the whole pipeline from the command line.
 *
 * This file only turns argv into a fit description (spec.c validates every option, the same
 * code that validates job-file keys) and hands it to fitrun.c. Usage errors exit 2 before any
 * file is touched. Exit status: 0 converged, 1 any error or a fit that did not converge (its
 * result is still printed), 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/jitfit.h"
#include "commands.h"
#include "fitrun.h"
#include "help.h"
#include "spec.h"
#include "util.h"

/* `--name value` or `--name=value` at argv[*i]. Returns 1 and sets *val when argv[*i] is this
 * option, -1 when its value is missing, 0 when it is another argument. */
static int opt(int argc, char **argv, int *i, const char *name, const char **val) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *val = argv[++*i];
    return 1;
}

int jf_cli_parse_option(int argc, char **argv, int *i, jf_spec *s, const char *cmd) {
    const char *arg = argv[*i];
    char key[64], flag[72];
    if (strcmp(arg, "-v") == 0) arg = "--verbose";
    if (strncmp(arg, "--", 2) != 0) return jf_run_setting_error(NULL, "unknown option '%s'", arg);
    size_t kl = strcspn(arg + 2, "=");
    if (kl == 0 || kl >= sizeof key - 1) return jf_run_setting_error(NULL, "unknown option '%s'", arg);
    memcpy(key, arg + 2, kl);
    key[kl] = '\0';
    for (char *p = key; *p; p++)
        if (*p == '-') *p = '_';
        else if (*p == '_') return jf_run_setting_error(NULL, "unknown option '%s'", arg);
    /* Job-file-only keys have no option. */
    if (strcmp(key, "model") == 0 || strcmp(key, "data") == 0 || strncmp(key, "param", 5) == 0)
        return jf_run_setting_error(NULL, "unknown option '%s'", arg);
    snprintf(flag, sizeof flag, "--%.*s", (int)kl, arg + 2);
    const char *v = "true";
    if (!jf_spec_is_flag(key)) {
        /* an unknown option is that, not one that "needs a value" */
        if (!jf_spec_is_key(key)) return jf_run_setting_error(NULL, "unknown option '%s'", arg);
        int r = opt(argc, argv, i, flag, &v);
        if (r < 0) return jf_run_setting_error(NULL, "option %s needs a value", flag);
    } else if (arg[2 + kl] == '=') {
        v = arg + 3 + kl;
    }
    /* An empty value unsets a job file's setting (run); fit has no file underneath, so there
     * it can only be a slip (`--output "$OUT"` with OUT unset) and must not pass silently. */
    if (!*v && strcmp(cmd, "fit") == 0)
        return jf_run_setting_error(NULL, "option %s needs a value (it is empty)", flag);
    char *msg = NULL;
    jf_spec_rc rc = jf_spec_set(s, key, v, NULL, NULL, &msg);
    int status = 0;
    if (rc == JF_SPEC_UNKNOWN) status = jf_run_setting_error(NULL, "unknown option '%s'", arg);
    else if (rc == JF_SPEC_NOMEM) jf_cli_error("out of memory"), status = 1;
    else if (rc == JF_SPEC_BAD && strcmp(msg, "needs a value") == 0)
        status = jf_run_setting_error(NULL, "option %s needs a value", flag);
    else if (rc == JF_SPEC_BAD) status = jf_run_setting_error(NULL, "%s: %s", flag, msg);
    free(msg);
    return status;
}

int jf_cli_wants_json(int argc, char **argv, FILE **to) {
    jf_spec scratch;
    jf_spec_init(&scratch);
    int dash = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) continue; /* MODEL, DATA, JOB, -v, -h */
        char key[64];
        size_t kl = strcspn(arg + 2, "=");
        if (kl >= sizeof key) continue;
        for (size_t k = 0; k < kl; k++) key[k] = arg[2 + k] == '-' ? '_' : arg[2 + k];
        key[kl] = '\0';
        const char *v = arg[2 + kl] == '=' ? arg + 3 + kl : NULL;
        char *msg = NULL;
        if (strcmp(key, "json") == 0) {
            (void)jf_spec_set(&scratch, "json", v ? v : "true", NULL, NULL, &msg);
        } else if (strcmp(key, "only") == 0 ||
                   (jf_spec_is_key(key) && !jf_spec_is_flag(key))) {
            if (!v && i + 1 < argc) v = argv[++i]; /* an option's value is not an option */
            if (strcmp(key, "output") == 0) dash = v && strcmp(v, "-") == 0;
        }
        free(msg);
    }
    int json = scratch.json;
    jf_spec_free(&scratch);
    if (to) *to = dash ? stderr : stdout;
    return json;
}

int jf_cmd_fit(int argc, char **argv) {
    jf_spec s;
    jf_spec_init(&s);
    const char *model = NULL, *data = NULL;
    int options = 1; /* cleared by "--", so a formula may start with '-' */
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *arg = argv[i];
        if (!options || arg[0] != '-' || arg[1] == '\0') {
            if (!model) model = arg;
            else if (!data) data = arg;
            else rc = jf_run_setting_error(NULL, "unexpected argument '%s'", arg);
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options = 0;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            jf_help_print(stdout, "fit");
            jf_spec_free(&s);
            return 0;
        }
        rc = jf_cli_parse_option(argc, argv, &i, &s, "fit");
    }
    if (rc == 0 && (!model || !data)) rc = jf_run_setting_error(NULL, "expected MODEL and DATA");
    if (rc == 0 && ((s.model = strdup(model)) == NULL || (s.data = strdup(data)) == NULL)) {
        jf_cli_error("out of memory");
        rc = 1;
    }
    /* With --output - the CSV is standard output, so the report (text or JSON) moves to
     * stderr rather than being interleaved with it. */
    FILE *report = s.output && strcmp(s.output, "-") == 0 ? stderr : stdout;
    if (rc == 0 && s.json) {
        /* a fit that fails before its report still prints one JSON object, as run --json's */
        rc = jf_run_spec_json(&s, report, NULL);
    } else if (rc == 0) {
        rc = jf_run_spec(&s, report, NULL);
    } else if (jf_cli_wants_json(argc, argv, &report)) {
        /* so does a usage error, wherever --json stands among the options */
        jf_run_json_error(report, NULL, jf_cli_last_error());
    }
    jf_spec_free(&s);
    return rc;
}

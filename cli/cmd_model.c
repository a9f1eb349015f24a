/* Front-end subcommands: `check` (parse and list), `eval` (value and gradient at a point) and
 * `diff` (the simplified derivatives). They exercise the model compiler without data, which is
 * how users debug a formula before fitting it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/jitfit.h"
#include "commands.h"
#include "util.h"

/* Prints a number for human output: shortest round-trip form. */
static void print_num(FILE *f, double v) {
    char buf[64];
    jf_cli_format_double(buf, sizeof buf, v);
    fputs(buf, f);
}

/* Why a model text could not be printed: the library gives no text past 16 MiB (a small DAG
 * whose shared subexpressions are written out at every use can need far more), and out of
 * memory, which is the less likely reason, looks the same. */
static const char *too_long(const char *what) {
    static char msg[512];
    snprintf(msg, sizeof msg,
             "%s is too long to print (over 16 MiB of text: shared subexpressions are written "
             "out at every use), or memory ran out",
             what);
    return msg;
}

int jf_cmd_check(int argc, char **argv) {
    /* `--` lets a formula start with '-', as in the other commands */
    int dashes = argc == 3 && strcmp(argv[1], "--") == 0;
    if (argc != 2 + dashes || (!dashes && argv[1][0] == '-')) {
        fprintf(stderr, "usage: jitfit check [--] MODEL\n");
        return 2;
    }
    jf_model *m = jf_cli_load_model(argv[1 + dashes], NULL, 0);
    if (!m) return 1;
    printf("response: %s\n", jf_model_response_name(m));
    printf("variables (%zu):", jf_model_num_vars(m));
    for (size_t j = 0; j < jf_model_num_vars(m); j++) printf(" %s", jf_model_var_name(m, j));
    printf("\nparameters (%zu):\n", jf_model_num_params(m));
    for (size_t k = 0; k < jf_model_num_params(m); k++) {
        double lo, hi, v = jf_model_param_initial(m, k);
        jf_model_param_bounds(m, k, &lo, &hi);
        printf("  %s", jf_model_param_name(m, k));
        if (!isnan(v)) {
            printf(" = ");
            print_num(stdout, v);
        }
        if (!isinf(lo) || !isinf(hi)) {
            printf(" in [");
            print_num(stdout, lo);
            printf(", ");
            print_num(stdout, hi);
            printf("]");
        }
        printf("\n");
    }
    char *text = jf_model_expression_text(m);
    if (text) printf("model: %s ~ %s\n", jf_model_response_name(m), text);
    else fprintf(stderr, "jitfit: note: %s\n", too_long("the model expression"));
    jf_free(text);
    jf_model_free(m);
    return 0;
}

/* Parses `--name value` / `--name=value` at argv[*i]; returns the value or NULL. */
static const char *opt_value(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        jf_cli_error("option %s needs a value", name);
        return "";
    }
    return argv[++*i];
}

/* The command's one positional argument, MODEL: 0, or 2 after saying a second one is too many. */
static int take_model(const char *cmd, const char *arg, const char **model) {
    if (*model) {
        jf_cli_error("%s: unexpected argument '%s'", cmd, arg);
        return 2;
    }
    *model = arg;
    return 0;
}

static const char eval_usage[] =
    "usage: jitfit eval [--params a=1,b=2] [--at x=0.5] [--backend interp|c|cuda] [--json] [--] "
    "MODEL\n";

int jf_cmd_eval(int argc, char **argv) {
    const char *model = NULL, *params = NULL, *at = NULL, *backend = "interp";
    int json = 0, options = 1; /* options: cleared by "--", so a formula may start with '-' */
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (options && strcmp(argv[i], "--") == 0) options = 0;
        else if (!options) {
            if (take_model("eval", argv[i], &model)) return 2;
        } else if ((v = opt_value(argc, argv, &i, "--params"))) params = v;
        else if ((v = opt_value(argc, argv, &i, "--at"))) at = v;
        else if ((v = opt_value(argc, argv, &i, "--backend"))) backend = v;
        else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (argv[i][0] == '-' && argv[i][1] != '\0' && !model) {
            jf_cli_error("eval: unknown option '%s'", argv[i]);
            return 2;
        } else if (take_model("eval", argv[i], &model)) {
            return 2;
        }
    }
    if (!model || (params && !*params) || (at && !*at)) {
        fputs(eval_usage, stderr);
        return 2;
    }
    int be;
    if (strcmp(backend, "interp") == 0) be = JF_BACKEND_INTERP;
    else if (strcmp(backend, "c") == 0) be = JF_BACKEND_C;
    else if (strcmp(backend, "cuda") == 0) be = JF_BACKEND_CUDA;
    else {
        jf_cli_error("eval: unknown backend '%s' (use interp, c or cuda)", backend);
        return 2;
    }
    jf_model *m = jf_cli_load_model(model, NULL, 0);
    if (!m) return 1;
    size_t np = jf_model_num_params(m), nv = jf_model_num_vars(m);
    double *p = calloc(np + 1, sizeof *p), *x = calloc(nv + 1, sizeof *x);
    double *g = calloc(np + 1, sizeof *g);
    int *pset = calloc(np + 1, sizeof *pset), *xset = calloc(nv + 1, sizeof *xset);
    int rc = 1;
    if (!p || !x || !g || !pset || !xset) {
        jf_cli_error("out of memory");
        goto done;
    }
    for (size_t k = 0; k < np; k++) {
        p[k] = jf_model_param_initial(m, k);
        pset[k] = !isnan(p[k]);
    }
    /* values that do not fit the model are usage errors (exit 2), as fit's --p0 */
    rc = 2;
    char *msg = NULL;
    if ((params && jf_cli_assign_by_name(m, 0, params, "--params", p, pset, &msg) != 0) ||
        (at && jf_cli_assign_by_name(m, 1, at, "--at", x, xset, &msg) != 0)) {
        jf_cli_error("eval: %s", msg ? msg : "out of memory");
        free(msg);
        goto done;
    }
    for (size_t k = 0; k < np; k++)
        if (!pset[k]) {
            jf_cli_error("eval: no value for parameter '%s' (give it in --params)",
                         jf_model_param_name(m, k));
            goto done;
        }
    for (size_t j = 0; j < nv; j++)
        if (!xset[j]) {
            jf_cli_error("eval: no value for variable '%s' (give it in --at)",
                         jf_model_var_name(m, j));
            goto done;
        }
    rc = 1;
    double value;
    char *err = NULL;
    int st = jf_model_eval_backend(m, be, p, x, &value, g, &err);
    if (st != JF_OK) {
        jf_cli_error("eval: %s", err ? err : jf_status_string(st));
        jf_free(err);
        goto done;
    }
    if (err) fprintf(stderr, "jitfit: warning: %s\n", err);
    jf_free(err);
    if (json) {
        printf("{\"value\": ");
        jf_cli_json_number(stdout, value);
        printf(", \"gradient\": {");
        for (size_t k = 0; k < np; k++) {
            if (k) printf(", ");
            jf_cli_json_string(stdout, jf_model_param_name(m, k));
            printf(": ");
            jf_cli_json_number(stdout, g[k]);
        }
        printf("}}\n");
    } else {
        printf("value: ");
        print_num(stdout, value);
        printf("\n");
        for (size_t k = 0; k < np; k++) {
            printf("d/d%s: ", jf_model_param_name(m, k));
            print_num(stdout, g[k]);
            printf("\n");
        }
    }
    rc = 0;
done:
    if (rc == 2) fputs(eval_usage, stderr);
    free(p);
    free(x);
    free(g);
    free(pset);
    free(xset);
    jf_model_free(m);
    return rc;
}

int jf_cmd_diff(int argc, char **argv) {
    const char *model = NULL, *param = NULL;
    int options = 1; /* cleared by "--" */
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (options && strcmp(argv[i], "--") == 0) options = 0;
        else if (!options) {
            if (take_model("diff", argv[i], &model)) return 2;
        } else if ((v = opt_value(argc, argv, &i, "--param"))) param = v;
        else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            jf_cli_error("diff: unknown option '%s'", argv[i]);
            return 2;
        } else if (take_model("diff", argv[i], &model)) {
            return 2;
        }
    }
    if (!model || (param && !*param)) {
        fprintf(stderr, "usage: jitfit diff [--param NAME] [--] MODEL\n");
        return 2;
    }
    jf_model *m = jf_cli_load_model(model, NULL, 0);
    if (!m) return 1;
    int rc = 0, found = 0;
    for (size_t k = 0; k < jf_model_num_params(m); k++) {
        const char *name = jf_model_param_name(m, k);
        if (param && strcmp(param, name) != 0) continue;
        found = 1;
        char *t = jf_model_derivative_text(m, k);
        if (!t) {
            char what[256];
            snprintf(what, sizeof what, "d/d%s", name);
            jf_cli_error("%s", too_long(what));
            rc = 1;
            break;
        }
        printf("d/d%s = %s\n", name, t);
        jf_free(t);
    }
    if (param && !found) { /* a usage error (exit 2), as eval's --params naming none */
        jf_cli_error("diff: the model has no parameter '%s'", param);
        rc = 2;
    }
    jf_model_free(m);
    return rc;
}

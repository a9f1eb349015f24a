/* The jitfit command: dispatches to one subcommand per pipeline use.
 *
 *   check   parse and resolve a model            (grammar/)
 *   diff    show the symbolic derivatives         (codegen/diff)
 *   eval    value and gradient at a point         (interp | compiled C | CUDA)
 *   codegen print the generated kernel source     (codegen/emit_*)
 *   cache   inspect or clear the kernel cache     (runtime/cache)
 *   fit     fit a model to a data file            (solver/)
 *   run     run the fits of a job file            (the fit pipeline, several times)
 *   doctor  machine facts and self-test fits      (runtime/device, every backend)
 *   help    documentation embedded from docs/
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../include/jitfit.h"
#include "../runtime/jit_cc.h"
#include "commands.h"
#include "help.h"
#include "output.h"

/* Ctrl-C (or a SIGTERM, SIGHUP) while the C compiler runs: the compiler, in a process group
 * of its own, gets the signal too, as make's children do; while --output is written, its
 * temporary file is removed; then jitfit ends as the signal would have ended it (the handler
 * is reset by SA_RESETHAND, and the raised signal is delivered when the handler returns). */
static void on_terminating_signal(int sig) {
    jf_cc_signal_running(sig);
    jf_output_signal_cleanup();
    raise(sig);
}

static void forward_terminating_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        /* one the caller ignores (nohup, a background job) stays ignored */
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_terminating_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_RESTART;
        sigaction(sigs[i], &sa, NULL);
    }
}

typedef struct command {
    const char *name;                /* subcommand name */
    int (*run)(int argc, char **argv); /* its entry point */
    const char *summary;             /* one line for `jitfit help` */
} command;

static const command commands[] = {
    {"check", jf_cmd_check, "check MODEL                      parse a model, list its parameters"},
    {"eval", jf_cmd_eval, "eval MODEL [options]             value and gradient at a point"},
    {"diff", jf_cmd_diff, "diff MODEL [--param NAME]        print the simplified derivatives"},
    {"codegen", jf_cmd_codegen, "codegen MODEL [--target c|cuda]  print generated kernel code"},
    {"cache", jf_cmd_cache, "cache dir|info|clear|prune       inspect, clear or trim the kernel cache"},
    {"fit", jf_cmd_fit, "fit MODEL DATA [options]         fit a model to data"},
    {"run", jf_cmd_run, "run JOB [options]                run the fits of a job file (INI)"},
    {"doctor", jf_cmd_doctor, "doctor                           what this machine offers; self-test fits"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: jitfit COMMAND [ARGS]\n\n"
               "MODEL is a formula (e.g. 'a*exp(-b*x)+c') or the path of a model file.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n", commands[i].summary);
    fprintf(f, "  help [TOPIC]                     documentation (fit, run, dsl, howto, ...)\n");
    fprintf(f, "  version                          print the version\n");
}

/* A command's output is its result: where it could not be written (`> out.json` on a full
 * disk), exit 0 would say all went well, so every command ends here. stdio kept the error. */
static int finish(int rc) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "jitfit: standard output: write error (%s): the output is lost\n",
                strerror(errno ? errno : EIO));
        if (rc == 0) rc = 1;
    }
    return rc;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2) return jf_cmd_help(argc - 1, argv + 1);
        usage(stdout);
        fputc('\n', stdout);
        jf_help_topics(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("jitfit %s\n", JITFIT_VERSION);
        return 0;
    }
    forward_terminating_signals();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd, commands[i].name) != 0) continue;
        /* `jitfit COMMAND --help` (or -h) before any `--`: the command's section, as `jitfit
         * help COMMAND` (fit and run parse it among their options themselves) */
        int own = strcmp(cmd, "fit") == 0 || strcmp(cmd, "run") == 0;
        for (int a = 2; !own && a < argc && strcmp(argv[a], "--") != 0; a++)
            if (strcmp(argv[a], "-h") == 0 || strcmp(argv[a], "--help") == 0)
                return jf_help_print(stdout, cmd) == 0 ? 0 : 1;
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "jitfit: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) { return finish(run(argc, argv)); }

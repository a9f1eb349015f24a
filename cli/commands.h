/* The jitfit command's subcommands. Each takes argv as given after `jitfit` (argv[0] is the
 * subcommand's name) and returns the process exit status: 0 success, 1 a user-facing error
 * (already printed on stderr), 2 a usage error. */
#ifndef JF_CLI_COMMANDS_H
#define JF_CLI_COMMANDS_H

#include <stdio.h>

int jf_cmd_check(int argc, char **argv);   /* jitfit check MODEL */
int jf_cmd_eval(int argc, char **argv);    /* jitfit eval MODEL --params .. --at .. */
int jf_cmd_diff(int argc, char **argv);    /* jitfit diff MODEL [--param NAME] */
int jf_cmd_codegen(int argc, char **argv); /* jitfit codegen MODEL --target c|cuda */
int jf_cmd_cache(int argc, char **argv);   /* jitfit cache dir|info|clear */
int jf_cmd_fit(int argc, char **argv);     /* jitfit fit MODEL DATA [options] */
int jf_cmd_run(int argc, char **argv);     /* jitfit run JOB [options] */
int jf_cmd_doctor(int argc, char **argv);  /* jitfit doctor */
int jf_cmd_help(int argc, char **argv);    /* jitfit help [TOPIC] */

struct jf_spec;
/* Parses the option at argv[*i] (advancing *i past its value) into s, as `jitfit fit` and
 * `jitfit run` share them. Returns 0, or the exit status after printing a usage error. */
int jf_cli_parse_option(int argc, char **argv, int *i, struct jf_spec *s, const char *cmd);
/* 1 when the options of fit or run in argv ask for JSON (the last --json or --json=BOOL
 * before any `--` wins), read without validating anything, so that a usage error can be
 * reported as JSON too; *to (when not NULL) receives the stream the report goes to: stderr
 * with --output -, else stdout. */
int jf_cli_wants_json(int argc, char **argv, FILE **to);

#endif

/* `jitfit help [TOPIC]`: the user documentation, embedded in the binary at build time from
 * docs/CLI.md, docs/DSL.md and docs/HOWTO.md (cmake/embed_docs.cmake), so there is one text to
 * keep right. A topic is a command (its "## `jitfit COMMAND`" section of docs/CLI.md) or one of
 * the documents: dsl, howto, cli (all of CLI.md). */
#ifndef JF_CLI_HELP_H
#define JF_CLI_HELP_H

#include <stdio.h>

/* Prints the topic; returns 0, or -1 (printing nothing) when there is no such topic. */
int jf_help_print(FILE *f, const char *topic);

/* Lists the topics. */
void jf_help_topics(FILE *f);

#endif

/* cairo loaded at run time (see cairo_api.h). This file defines the pointers, so it includes
 * the header before the macros that rename cairo's functions exist: JF_CAIRO_NO_RENAME. */
#define JF_CAIRO_NO_RENAME
#include "cairo_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define JF_CAIRO_DEFINE(name) __typeof__(name) *jf_p_##name;
JF_CAIRO_FUNCS(JF_CAIRO_DEFINE)
#undef JF_CAIRO_DEFINE

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* empty when loaded */

static void load(void) {
    void *lib = dlopen("libcairo.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libcairo.so.2 (%s); install libcairo2",
                 e ? e : "not found");
        return;
    }
#define JF_CAIRO_RESOLVE(name)                                                                     \
    {                                                                                              \
        void *fn = dlsym(lib, #name);                                                              \
        if (!fn) {                                                                                 \
            snprintf(load_error, sizeof load_error, "libcairo.so.2 lacks %s (too old)", #name);   \
            return;                                                                                \
        }                                                                                          \
        memcpy(&jf_p_##name, &fn, sizeof fn);                                                      \
    }
    JF_CAIRO_FUNCS(JF_CAIRO_RESOLVE)
#undef JF_CAIRO_RESOLVE
}

int jf_cairo_load(char *why, size_t n) {
    pthread_once(&once, load);
    if (load_error[0]) {
        snprintf(why, n, "%s", load_error);
        return -1;
    }
    return 0;
}

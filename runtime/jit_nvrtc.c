/* The CUDA JIT backend (see jit_nvrtc.h): NVRTC through dlopen, the CUDA path through the
 * kernel cache, and small host helpers that run a model's kernels on device copies of host data
 * (for `jitfit eval --backend cuda` and the cross-check tests).
 *
 * nvrtc.h is included for its types and prototypes only (each function pointer takes the type
 * of the prototype); without the CUDA headers the NVRTC part reports itself unavailable.
 */
#define _GNU_SOURCE /* dladdr, to find the toolkit libnvrtc came from */
#include "jit_nvrtc.h"

#include <dlfcn.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/emit.h"
#include "cache.h"
#include "cuda_api.h"
#include "cuda_emu.h"

void *jf_nvrtc_open_beside(const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) return lib;
    }
    char why[256];
    jf_nvrtc_load(why, sizeof why); /* only to know where the toolkit is */
    const char *nv = jf_nvrtc_library_path();
    const char *slash = strrchr(nv, '/');
    for (size_t i = 0; slash && i < count; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - nv), nv, names[i]);
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib) return lib;
    }
    return NULL;
}

#ifdef JF_HAVE_CUDA_HEADERS
#include <nvrtc.h>

/* The NVRTC entry points we use. */
#define JF_NVRTC_FUNCS(X)                                                                          \
    X(nvrtcVersion)                                                                                \
    X(nvrtcGetErrorString)                                                                         \
    X(nvrtcCreateProgram)                                                                          \
    X(nvrtcDestroyProgram)                                                                         \
    X(nvrtcCompileProgram)                                                                         \
    X(nvrtcGetProgramLogSize)                                                                      \
    X(nvrtcGetProgramLog)                                                                          \
    X(nvrtcGetPTXSize)                                                                             \
    X(nvrtcGetPTX)                                                                                 \
    X(nvrtcGetCUBINSize)                                                                           \
    X(nvrtcGetCUBIN)

/* The list of supported architectures is newer (11.2) than the rest: optional. */
#define JF_NVRTC_ARCHS_MAX 64

/* The loaded library, filled once by load_nvrtc. */
static struct {
#define JF_NVRTC_MEMBER(name) __typeof__(name) *name;
    JF_NVRTC_FUNCS(JF_NVRTC_MEMBER)
#undef JF_NVRTC_MEMBER
    int ok;             /* 1 when every entry point was found */
    int major, minor;   /* its version */
    int archs[JF_NVRTC_ARCHS_MAX]; /* the architectures it compiles for, ascending */
    int narchs;                    /* their number; 0: unknown */
    char why[256];      /* "unavailable: <reason>" when not ok */
    char path[4096];    /* the file it was loaded from */
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void load_nvrtc(void) {
    /* The unversioned name first (a toolkit's development link), then SONAMEs newest first. */
    static const char *const names[] = {"libnvrtc.so",    "libnvrtc.so.13", "libnvrtc.so.12",
                                        "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    /* A toolkit installed but not on the loader's path (no ldconfig entry, no LD_LIBRARY_PATH)
     * is common: its usual directories, $CUDA_HOME's and $CUDA_PATH's first. */
    const char *home = getenv("CUDA_HOME"), *cpath = getenv("CUDA_PATH");
    const char *const dirs[][2] = {{home, "/lib64"},
                                   {cpath, "/lib64"},
                                   {"/usr/local/cuda", "/lib64"},
                                   {"/usr/local/cuda", "/targets/x86_64-linux/lib"},
                                   {"/usr/local/cuda", "/targets/sbsa-linux/lib"}};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0] && !lib; d++) {
        if (!dirs[d][0] || !dirs[d][0][0]) continue;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s%s/%s", dirs[d][0], dirs[d][1], names[i]);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!lib) {
        snprintf(nv.why, sizeof nv.why,
                 "unavailable: libnvrtc.so not found (on the loader's path, in $CUDA_HOME/lib64 "
                 "or in /usr/local/cuda)");
        return;
    }
#define JF_NVRTC_RESOLVE(name)                                                                     \
    {                                                                                              \
        void *fn = dlsym(lib, #name);                                                              \
        if (!fn) {                                                                                 \
            snprintf(nv.why, sizeof nv.why, "unavailable: libnvrtc lacks %s (too old)", #name);    \
            return;                                                                                \
        }                                                                                          \
        memcpy(&nv.name, &fn, sizeof fn);                                                          \
    }
    JF_NVRTC_FUNCS(JF_NVRTC_RESOLVE)
#undef JF_NVRTC_RESOLVE
    if (nv.nvrtcVersion(&nv.major, &nv.minor) != NVRTC_SUCCESS) {
        snprintf(nv.why, sizeof nv.why, "unavailable: nvrtcVersion failed");
        return;
    }
    Dl_info info;
    void *any;
    memcpy(&any, &nv.nvrtcVersion, sizeof any);
    if (dladdr(any, &info) && info.dli_fname) snprintf(nv.path, sizeof nv.path, "%s", info.dli_fname);
    nvrtcResult (*num_archs)(int *), (*get_archs)(int *);
    void *fn_num = dlsym(lib, "nvrtcGetNumSupportedArchs");
    void *fn_get = dlsym(lib, "nvrtcGetSupportedArchs");
    memcpy(&num_archs, &fn_num, sizeof fn_num);
    memcpy(&get_archs, &fn_get, sizeof fn_get);
    int count = 0;
    if (num_archs && get_archs && num_archs(&count) == NVRTC_SUCCESS && count > 0 &&
        count <= JF_NVRTC_ARCHS_MAX && get_archs(nv.archs) == NVRTC_SUCCESS)
        nv.narchs = count;
    nv.ok = 1;
}

void jf_nvrtc_archs(const int **archs, int *count) {
    *archs = nv.archs;
    *count = nv.ok ? nv.narchs : 0;
}

int jf_nvrtc_load(char *why, size_t n) {
    pthread_once(&nv_once, load_nvrtc);
    if (!nv.ok) {
        snprintf(why, n, "%s", nv.why);
        return JF_ERR_UNAVAILABLE;
    }
    return JF_OK;
}

void jf_nvrtc_version(int *major, int *minor) {
    *major = nv.ok ? nv.major : 0;
    *minor = nv.ok ? nv.minor : 0;
}

const char *jf_nvrtc_library_path(void) { return nv.ok ? nv.path : ""; }

int jf_nvrtc_compile(const char *source, int arch, int want_cubin, unsigned char **image,
                     size_t *size, char **log) {
    char why[256];
    *image = NULL;
    *size = 0;
    if (log) *log = NULL;
    if (jf_nvrtc_load(why, sizeof why) != JF_OK) {
        if (log) *log = strdup(why);
        return JF_ERR_UNAVAILABLE;
    }
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s_%d", want_cubin ? "sm" : "compute",
             arch);
    const char *opts[] = {archopt, JF_NVRTC_STD, JF_NVRTC_FMAD};
    nvrtcProgram prog;
    nvrtcResult r = nv.nvrtcCreateProgram(&prog, source, "jitfit_kernels.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        if (log) *log = strdup(nv.nvrtcGetErrorString(r));
        return r == NVRTC_ERROR_OUT_OF_MEMORY ? JF_ERR_NOMEM : JF_ERR_COMPILE;
    }
    /* Some NVRTC releases (11.7-12.6.1) switch the locale while compiling; put it back. */
    locale_t thread_loc = uselocale((locale_t)0);
    const char *g = setlocale(LC_ALL, NULL);
    char *global_loc = g ? strdup(g) : NULL;
    r = nv.nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (uselocale((locale_t)0) != thread_loc) uselocale(thread_loc);
    g = setlocale(LC_ALL, NULL);
    if (global_loc && g && strcmp(g, global_loc) != 0) setlocale(LC_ALL, global_loc);
    free(global_loc);

    int st = JF_OK;
    if (r != NVRTC_SUCCESS) {
        st = JF_ERR_COMPILE;
        size_t ls = 0;
        if (log && nv.nvrtcGetProgramLogSize(prog, &ls) == NVRTC_SUCCESS && ls > 0) {
            *log = malloc(ls);
            if (*log && nv.nvrtcGetProgramLog(prog, *log) != NVRTC_SUCCESS) (*log)[0] = '\0';
        }
        if (log && !*log) *log = strdup(nv.nvrtcGetErrorString(r));
    } else {
        size_t n = 0;
        r = want_cubin ? nv.nvrtcGetCUBINSize(prog, &n) : nv.nvrtcGetPTXSize(prog, &n);
        unsigned char *img = r == NVRTC_SUCCESS ? malloc(n ? n : 1) : NULL;
        if (img && (want_cubin ? nv.nvrtcGetCUBIN(prog, (char *)img)
                               : nv.nvrtcGetPTX(prog, (char *)img)) == NVRTC_SUCCESS) {
            *image = img;
            *size = n;
        } else {
            free(img);
            st = r == NVRTC_SUCCESS ? JF_ERR_NOMEM : JF_ERR_COMPILE;
            if (log) *log = strdup(r == NVRTC_SUCCESS ? "out of memory" : nv.nvrtcGetErrorString(r));
        }
    }
    nv.nvrtcDestroyProgram(&prog);
    return st;
}

#else /* !JF_HAVE_CUDA_HEADERS */

static const char no_headers[] = "unavailable: jitfit was built without the CUDA headers";

int jf_nvrtc_load(char *why, size_t n) {
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
void jf_nvrtc_version(int *major, int *minor) {
    *major = 0;
    *minor = 0;
}
const char *jf_nvrtc_library_path(void) { return ""; }
void jf_nvrtc_archs(const int **archs, int *count) {
    *archs = NULL;
    *count = 0;
}
int jf_nvrtc_compile(const char *source, int arch, int want_cubin, unsigned char **image,
                     size_t *size, char **log) {
    (void)source;
    (void)arch;
    (void)want_cubin;
    *image = NULL;
    *size = 0;
    if (log) *log = strdup(no_headers);
    return JF_ERR_UNAVAILABLE;
}

#endif

int jf_nvrtc_target(int arch, const int *supported, int nsupported, int *cubin) {
    *cubin = 1;
    if (nsupported <= 0) return arch;
    int below = 0;
    for (int i = 0; i < nsupported; i++) {
        if (supported[i] == arch) return arch;
        if (supported[i] < arch && supported[i] > below) below = supported[i];
    }
    *cubin = 0;
    return below;
}

/* ---- model kernels on the device ---------------------------------------------------------- */

static const char *const kernel_names[4] = {"jf_residual", "jf_jacobian_row", "jf_normal_eq",
                                            "jf_reduce_blocks"};

/* One loaded CUDA module. Owned by the memory cache once stored there, which unloads it
 * (cuda_module_unload) once nobody holds it and it has aged out of the idle modules. */
typedef struct cuda_module {
    void *module;                    /* the driver's CUmodule, or the emulator's module */
    int emulated;                    /* 1: loaded by the emulator (cuda_emu.h) */
    void *fn[JF_CUDA_MODULE_MAX_FNS]; /* its kernels, in the order they were asked for */
} cuda_module;

struct jf_cuda_kernels {
    const struct jf_model *m; /* the model (not owned) */
    const cuda_module *mod;   /* its module (owned by the memory cache) */
    jf_cache_entry *held;     /* the reference to mod's cache entry, given back when freed */
    int loss;                 /* the loss normal_eq was built for, -1: any */
    size_t nsums;             /* sums its normal_eq writes (jf_emit_cuda_fit_nsums) */
};

/* jf_cache_unload_fn of CUDA modules (jf_cuda_module_unload makes the context current on
 * whichever thread the cache unloads from). By who loaded it, not by the mode now: a test
 * that turns the emulator off (jf_cuda_emulate_reread) leaves its modules in the cache. */
static void cuda_module_unload(void *p) {
    cuda_module *cm = p;
    if (cm->emulated) jf_emu_module_unload(cm->module);
    else jf_cuda_module_unload(cm->module);
    free(cm);
}

static cuda_module *load_module(const unsigned char *image, const char *const *names, size_t nnames,
                                char *why, size_t n) {
    void *module;
    if (jf_cuda_module_load(image, &module, why, n) != JF_OK) {
        /* the usual cause: an NVRTC newer than the driver, whose code the driver cannot read */
        int vmaj, vmin;
        jf_nvrtc_version(&vmaj, &vmin);
        jf_cuda_driver_facts df;
        jf_cuda_driver_facts_get(&df);
        size_t len = strlen(why);
        if (df.version > 0 && vmaj * 1000 + vmin * 10 > df.version && len < n)
            snprintf(why + len, n - len,
                     " (NVRTC %d.%d is newer than the driver, CUDA %d.%d: use an NVRTC no newer "
                     "than the driver, e.g. by LD_LIBRARY_PATH, or update the driver)",
                     vmaj, vmin, df.version / 1000, df.version % 1000 / 10);
        return NULL;
    }
    cuda_module *cm = calloc(1, sizeof *cm);
    if (!cm) {
        snprintf(why, n, "out of memory");
        jf_cuda_module_unload(module);
        return NULL;
    }
    cm->module = module;
    cm->emulated = jf_cuda_emulated();
    for (size_t i = 0; i < nnames; i++) {
        cm->fn[i] = jf_cuda_module_function(module, names[i], why, n);
        if (!cm->fn[i]) {
            jf_cuda_module_unload(module);
            free(cm);
            return NULL;
        }
    }
    return cm;
}

/* The cache key of src's module compiled by the loaded NVRTC for a GPU of compute capability
 * device_arch, and what to compile for it (jf_nvrtc_target: the architecture in *arch, a CUBIN
 * or PTX in *cubin). JF_OK, or JF_ERR_UNAVAILABLE with the reason in why. */
static int nvrtc_key(const char *src, int device_arch, jf_cache_key *key, int *arch, int *cubin,
                     char *why, size_t n) {
    int vmaj = 0, vmin = 0, nsupported;
    const int *supported;
    jf_nvrtc_version(&vmaj, &vmin);
    jf_nvrtc_archs(&supported, &nsupported);
    *arch = jf_nvrtc_target(device_arch, supported, nsupported, cubin);
    if (!*arch) {
        snprintf(why, n,
                 "unavailable: NVRTC %d.%d cannot compile for this GPU (sm_%d; the oldest it "
                 "supports is sm_%d): use an older CUDA toolkit's NVRTC",
                 vmaj, vmin, device_arch, supported[0]);
        return JF_ERR_UNAVAILABLE;
    }
    *key = jf_cuda_cache_key(src, vmaj, vmin, device_arch, *arch, *cubin);
    return JF_OK;
}

/* The cache key of src's module for the present GPU and what to compile for it (jf_nvrtc_target:
 * the architecture in *arch, a CUBIN or PTX in *cubin), with the options o adjusted for the
 * emulator. JF_OK, or JF_ERR_UNAVAILABLE (no GPU or NVRTC, or a GPU the NVRTC cannot target)
 * with the reason in why. */
static int module_key(const char *src, jf_jit_options *o, jf_cache_key *key, int *arch,
                      int *cubin, char *why, size_t n) {
    if (jf_cuda_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    /* emulated (cuda_emu.h): the module's image is its source, built by the emulator when
     * loaded; it is kept in the memory cache only, under a key of its own (built again after
     * the memory cache has unloaded it) */
    int major, minor;
    jf_cuda_arch(&major, &minor);
    int device_arch = major * 10 + minor;
    if (!jf_cuda_emulated()) {
        if (jf_nvrtc_load(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
        return nvrtc_key(src, device_arch, key, arch, cubin, why, n);
    }
    *arch = device_arch;
    *cubin = 1;
    o->no_cache = 1;
    *key = jf_cuda_cache_key(src, -1, 0, device_arch, *arch, *cubin);
    return JF_OK;
}

jf_cache_key jf_cuda_cache_key(const char *src, int nvrtc_major, int nvrtc_minor,
                               int device_arch, int arch, int cubin) {
    char compiler[64], archs[32];
    if (nvrtc_major < 0) snprintf(compiler, sizeof compiler, "emulator");
    else snprintf(compiler, sizeof compiler, "nvrtc %d.%d", nvrtc_major, nvrtc_minor);
    /* PTX for an older architecture, compiled by the driver for this GPU (one newer than the
     * NVRTC): its own entry, since the driver's compiler, not NVRTC's, makes the code */
    if (cubin) snprintf(archs, sizeof archs, "sm_%d", arch);
    else snprintf(archs, sizeof archs, "compute_%d for sm_%d", arch, device_arch);
    jf_cache_key_parts parts = {"cuda", src, compiler, JF_NVRTC_FLAGS, archs};
    return jf_cache_key_make(&parts);
}

int jf_cuda_precompile(const char *src, const char *dirname, int device_arch, char *why,
                       size_t n) {
    jf_cache_key key;
    int arch, cubin;
    if (jf_nvrtc_load(why, n) != JF_OK ||
        nvrtc_key(src, device_arch, &key, &arch, &cubin, why, n) != JF_OK)
        return JF_ERR_UNAVAILABLE;
    jf_cache_dir dir;
    jf_cache_dir_open(dirname, 0, 1, &dir);
    if (dir.state != JF_CACHE_DIR_OK) {
        snprintf(why, n, "%s", dir.reason);
        return JF_ERR_IO;
    }
    unsigned char *image = NULL;
    size_t size = 0;
    if (jf_cache_disk_load(&dir, &key, JF_CACHE_KIND_CUDA_CUBIN, &image, &size, NULL, 0) ==
        JF_CACHE_ENTRY_HIT) {
        free(image);
        return JF_OK;
    }
    char *log = NULL;
    int st = jf_nvrtc_compile(src, arch, cubin, &image, &size, &log);
    if (st != JF_OK) {
        snprintf(why, n, "NVRTC failed: %.*s", (int)strcspn(log ? log : "", "\n"), log ? log : "");
        free(log);
        return st;
    }
    free(log);
    st = jf_cache_disk_store(&dir, &key, JF_CACHE_KIND_CUDA_CUBIN, image, size, why, n);
    free(image);
    return st;
}

int jf_cuda_module_cached(const char *source, const jf_jit_options *opts) {
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    if (opts) o = *opts;
    jf_cache_key key;
    int arch, cubin;
    char why[256];
    if (module_key(source, &o, &key, &arch, &cubin, why, sizeof why) != JF_OK) return 0;
    if (jf_cache_mem_has(&key)) return 1;
    jf_cache_dir dir;
    jf_cache_dir_open(o.cache_dir, o.no_cache, 0, &dir);
    if (dir.state != JF_CACHE_DIR_OK) return 0;
    unsigned char *image = NULL;
    size_t size = 0;
    int hit = jf_cache_disk_load(&dir, &key, JF_CACHE_KIND_CUDA_CUBIN, &image, &size, NULL, 0) ==
              JF_CACHE_ENTRY_HIT;
    free(image);
    return hit;
}

/* The module of src (from the memory cache, the disk cache or NVRTC) with its kernels
 * looked up in the order of names: its cache entry, held for the caller, in *out. */
static int module_get(const char *src, const char *const *names, size_t nnames,
                      const jf_jit_options *opts, jf_cache_entry **out, jf_cache_result *cache,
                      char *why, size_t n, char *warn, size_t wn) {
    *out = NULL;
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    if (opts) o = *opts;
    if (nnames > JF_CUDA_MODULE_MAX_FNS) {
        snprintf(why, n, "too many kernels in one module");
        return JF_ERR_INTERNAL;
    }
    jf_cache_key key;
    int arch, cubin;
    if (module_key(src, &o, &key, &arch, &cubin, why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    const int emu = jf_cuda_emulated();
    jf_cache_result res = JF_CACHE_MEMORY;
    jf_cache_entry *held = jf_cache_mem_get(&key);
    char msg[4400];
    if (!held) {
        jf_cache_dir dir;
        jf_cache_dir_open(o.cache_dir, o.no_cache, 1, &dir);
        if (dir.state == JF_CACHE_DIR_REFUSED) {
            snprintf(msg, sizeof msg, "kernel cache not used: %s", dir.reason);
            jf_warning_append(warn, wn, msg);
        }
        unsigned char *image = NULL;
        size_t size = 0;
        cuda_module *nm = NULL;
        if (dir.state == JF_CACHE_DIR_OK &&
            jf_cache_disk_load(&dir, &key, JF_CACHE_KIND_CUDA_CUBIN, &image, &size, why, n) ==
                JF_CACHE_ENTRY_HIT) {
            nm = load_module(image, names, nnames, why, n);
            res = JF_CACHE_DISK;
            free(image);
            image = NULL;
        }
        if (!nm && emu) { /* a cache for a GPU machine, filled on the emulator (jit_nvrtc.h) */
            const char *pre = getenv("JITFIT_CUDA_PRECOMPILE_DIR");
            char pwhy[512];
            if (pre && *pre && jf_cuda_precompile(src, pre, 90, pwhy, sizeof pwhy) != JF_OK) {
                snprintf(msg, sizeof msg, "not precompiled for sm_90: %.500s", pwhy);
                jf_warning_append(warn, wn, msg);
            }
        }
        if (!nm) {
            char *log = NULL;
            int st = emu ? ((image = (unsigned char *)strdup(src)) ? JF_OK : JF_ERR_NOMEM)
                         : jf_nvrtc_compile(src, arch, cubin, &image, &size, &log);
            if (st != JF_OK) {
                snprintf(why, n, "NVRTC failed: %.*s", (int)strcspn(log ? log : "", "\n"),
                         log ? log : "");
                free(log);
                return st;
            }
            free(log);
            if (dir.state == JF_CACHE_DIR_OK &&
                jf_cache_disk_store(&dir, &key, JF_CACHE_KIND_CUDA_CUBIN, image, size, msg,
                                    sizeof msg) != JF_OK)
                jf_warning_append(warn, wn, msg);
            nm = load_module(image, names, nnames, why, n);
            free(image);
            res = JF_CACHE_MISS;
            if (!nm) return JF_ERR_COMPILE;
        }
        held = jf_cache_mem_put(&key, nm, cuda_module_unload);
        if (!held) {
            cuda_module_unload(nm);
            snprintf(why, n, "out of memory");
            return JF_ERR_NOMEM;
        }
        /* another thread got there first: use its module, drop ours */
        if (jf_cache_entry_module(held) != nm) cuda_module_unload(nm);
    }
    if (cache) *cache = res;
    *out = held;
    return JF_OK;
}

int jf_cuda_module_get(const char *source, const char *const *names, size_t nnames,
                       const jf_jit_options *opts, void **fns, jf_cache_entry **held,
                       jf_cache_result *cache, char *why, size_t n, char *warn, size_t wn) {
    *held = NULL;
    int st = module_get(source, names, nnames, opts, held, cache, why, n, warn, wn);
    if (st != JF_OK) return st;
    const cuda_module *mod = jf_cache_entry_module(*held);
    for (size_t i = 0; i < nnames; i++) fns[i] = mod->fn[i];
    return JF_OK;
}

void jf_cuda_module_release(jf_cache_entry *held) { jf_cache_mem_release(held); }

int jf_cuda_no_prefetch(void) {
    const char *e = getenv("JITFIT_GPU_PREFETCH");
    return e && strcmp(e, "0") == 0;
}

char *jf_cuda_model_source(const struct jf_model *m, const jf_jit_options *opts, int loss) {
    jf_emit_options eo = jf_emit_options_default(JF_EMIT_CUDA);
    eo.cuda_loss = loss < 0 ? -1 : loss;
    eo.cuda_single = opts ? opts->single_precision : 0;
    eo.no_normal_eq = opts ? opts->cuda_no_normal_eq : 0;
    /* an experiment's knob (docs/PERFORMANCE.md): the H200 ran jf_normal_eq at 25 % occupancy,
     * limited by its registers; $JITFIT_GPU_NEQ_BLOCKS (1 to 8) trades registers for blocks */
    const char *e = getenv("JITFIT_GPU_NEQ_BLOCKS");
    int mb = e && *e ? atoi(e) : 0;
    eo.cuda_min_blocks = mb >= 1 && mb <= 8 ? mb : 0;
    eo.cuda_no_prefetch = jf_cuda_no_prefetch();
    return jf_emit(m, &eo);
}

int jf_cuda_kernels_get(const struct jf_model *m, const jf_jit_options *opts, int loss,
                        jf_cuda_kernels **out, jf_cache_result *cache, char *why, size_t n,
                        char *warn, size_t wn) {
    *out = NULL;
    if (cache) *cache = JF_CACHE_NONE;
    if (jf_cuda_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    if (!jf_cuda_emulated() && jf_nvrtc_load(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    char *src = jf_cuda_model_source(m, opts, loss);
    if (!src) {
        snprintf(why, n, "out of memory generating CUDA code");
        return JF_ERR_NOMEM;
    }
    const int no_normal_eq = opts ? opts->cuda_no_normal_eq : 0;
    jf_cache_entry *held = NULL;
    int st = module_get(src, kernel_names, no_normal_eq ? 2 : 4, opts, &held, cache, why, n,
                        warn, wn);
    free(src);
    if (st != JF_OK) return st;
    jf_cuda_kernels *k = calloc(1, sizeof *k);
    if (!k) {
        jf_cache_mem_release(held);
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    k->m = m;
    k->held = held;
    k->mod = jf_cache_entry_module(held);
    k->loss = loss < 0 ? -1 : loss;
    k->nsums = jf_emit_cuda_fit_nsums(m->np, opts ? opts->single_precision : 0);
    *out = k;
    return JF_OK;
}

size_t jf_cuda_kernels_nsums(const jf_cuda_kernels *k) { return k->nsums; }

void jf_cuda_kernels_free(jf_cuda_kernels *k) {
    if (!k) return;
    jf_cache_mem_release(k->held);
    free(k);
}

void *jf_cuda_kernels_function(const jf_cuda_kernels *k, jf_cuda_kernel which) {
    return k->mod->fn[which];
}

/* Device copies of one call's inputs. */
typedef struct dev_data {
    jf_devptr p, x, y, w; /* parameters, variables, response, weights (0 when absent) */
} dev_data;

static void dev_data_free(dev_data *d) {
    jf_cuda_free(d->p);
    jf_cuda_free(d->x);
    jf_cuda_free(d->y);
    jf_cuda_free(d->w);
}

static int dev_data_init(dev_data *d, const struct jf_model *m, const double *p, const double *x,
                         size_t ldx, const double *y, const double *w, size_t npts, char *why,
                         size_t n) {
    memset(d, 0, sizeof *d);
    size_t nx = m->nv ? ((m->nv - 1) * ldx + npts) : 0;
    int st = jf_cuda_alloc(&d->p, (m->np ? m->np : 1) * sizeof(double), why, n);
    if (st == JF_OK) st = jf_cuda_to_device(d->p, p, m->np * sizeof(double), why, n);
    if (st == JF_OK && nx) st = jf_cuda_alloc(&d->x, nx * sizeof(double), why, n);
    if (st == JF_OK && nx) st = jf_cuda_to_device(d->x, x, nx * sizeof(double), why, n);
    if (st == JF_OK && y) st = jf_cuda_alloc(&d->y, npts * sizeof(double), why, n);
    if (st == JF_OK && y) st = jf_cuda_to_device(d->y, y, npts * sizeof(double), why, n);
    if (st == JF_OK && w) st = jf_cuda_alloc(&d->w, npts * sizeof(double), why, n);
    if (st == JF_OK && w) st = jf_cuda_to_device(d->w, w, npts * sizeof(double), why, n);
    if (st != JF_OK) dev_data_free(d);
    return st;
}

static unsigned grid_for(size_t npts) {
    size_t g = (npts + JF_CUDA_BLOCK - 1) / JF_CUDA_BLOCK;
    return (unsigned)(g < 1 ? 1 : g > 1024 ? 1024 : g);
}

int jf_cuda_jacobian_rows(const jf_cuda_kernels *k, const double *p, const double *x, size_t ldx,
                          const double *y, const double *w, size_t npts, double *r, double *J,
                          char *why, size_t n) {
    const struct jf_model *m = k->m;
    if (jf_cuda_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    dev_data d;
    int st = dev_data_init(&d, m, p, x, ldx, y, w, npts, why, n);
    if (st != JF_OK) return st;
    jf_devptr dr = 0, dJ = 0;
    size_t nJ = npts * m->np;
    st = jf_cuda_alloc(&dr, npts * sizeof(double), why, n);
    if (st == JF_OK) st = jf_cuda_alloc(&dJ, (nJ ? nJ : 1) * sizeof(double), why, n);
    double *Jc = st == JF_OK ? malloc((nJ ? nJ : 1) * sizeof *Jc) : NULL;
    if (st == JF_OK && !Jc) {
        snprintf(why, n, "out of memory");
        st = JF_ERR_NOMEM;
    }
    if (st == JF_OK) {
        unsigned long long ldx_ = ldx, begin = 0, end = npts, ldj = npts;
        void *args[] = {&d.p, &d.x, &ldx_, &d.y, &d.w, &begin, &end, &dr, &dJ, &ldj};
        st = jf_cuda_launch(k->mod->fn[JF_CUDA_JACOBIAN_ROW], grid_for(npts), JF_CUDA_BLOCK, 0,
                            args, why, n);
    }
    if (st == JF_OK) st = jf_cuda_to_host(r, dr, npts * sizeof(double), why, n);
    if (st == JF_OK) st = jf_cuda_to_host(Jc, dJ, nJ * sizeof(double), why, n);
    if (st == JF_OK) /* the device writes J column-major; callers get rows */
        for (size_t i = 0; i < npts; i++)
            for (size_t c = 0; c < m->np; c++) J[i * m->np + c] = Jc[c * npts + i];
    free(Jc);
    jf_cuda_free(dr);
    jf_cuda_free(dJ);
    dev_data_free(&d);
    return st;
}

int jf_cuda_normal_eq(const jf_cuda_kernels *k, const double *p, const double *x, size_t ldx,
                      const double *y, const double *w, size_t npts, jf_loss loss, double f_scale,
                      double *acc, char *why, size_t n) {
    const struct jf_model *m = k->m;
    if (k->loss >= 0 && (int)loss != k->loss) {
        snprintf(why, n, "these CUDA kernels were built for loss %d only", k->loss);
        return JF_ERR_ARG;
    }
    if (jf_cuda_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    dev_data d;
    int st = dev_data_init(&d, m, p, x, ldx, y, w, npts, why, n);
    if (st != JF_OK) return st;
    size_t nsums = k->nsums; /* the caller's acc takes the first jf_emit_num_acc of them */
    unsigned grid = grid_for(npts);
    jf_devptr dpart = 0, dacc = 0;
    st = jf_cuda_alloc(&dpart, (size_t)grid * nsums * sizeof(double), why, n);
    if (st == JF_OK) st = jf_cuda_alloc(&dacc, nsums * sizeof(double), why, n);
    if (st == JF_OK) {
        unsigned long long ldx_ = ldx, begin = 0, end = npts;
        int loss_ = (int)loss;
        double fs = f_scale;
        jf_devptr nostop = 0;
        void *args[] = {&d.p, &d.x, &ldx_, &d.y, &d.w, &begin, &end, &loss_, &fs, &dpart, &nostop};
        st = jf_cuda_launch(k->mod->fn[JF_CUDA_NORMAL_EQ], grid, JF_CUDA_BLOCK, 0, args, why, n);
    }
    if (st == JF_OK) {
        unsigned int nb = grid;
        jf_devptr nostop = 0;
        void *args[] = {&dpart, &nb, &dacc, &nostop};
        st = jf_cuda_launch(k->mod->fn[JF_CUDA_REDUCE_BLOCKS], (unsigned)nsums, JF_CUDA_BLOCK, 0,
                           args, why, n);
    }
    if (st == JF_OK)
        st = jf_cuda_to_host(acc, dacc, jf_emit_num_acc(m->np) * sizeof(double), why, n);
    jf_cuda_free(dpart);
    jf_cuda_free(dacc);
    dev_data_free(&d);
    return st;
}

int jf_cuda_eval_point(const struct jf_model *m, const double *p, const double *x, double *value,
                       double *grad, char **note) {
    if (note) *note = NULL;
    char why[512];
    jf_cuda_kernels *k = NULL;
    int st = jf_cuda_kernels_get(m, NULL, JF_LOSS_LINEAR, &k, NULL, why, sizeof why, NULL, 0);
    double *J = NULL;
    if (st == JF_OK) {
        J = malloc((m->np ? m->np : 1) * sizeof *J);
        st = J ? jf_cuda_jacobian_rows(k, p, x, 1, NULL, NULL, 1, value, J, why, sizeof why)
               : JF_ERR_NOMEM;
        if (st == JF_ERR_NOMEM && !J) snprintf(why, sizeof why, "out of memory");
    }
    if (st == JF_OK && grad) memcpy(grad, J, m->np * sizeof *J);
    if (st != JF_OK && note) *note = strdup(why);
    free(J);
    jf_cuda_kernels_free(k);
    return st;
}

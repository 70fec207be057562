/*
 * A stand-in libnvidia-ml.so.1 for machines without an NVIDIA GPU: the few NVML calls the
 * exporter (through nvml-wrapper) and the Python recorder (through ctypes) make, answered from
 * a script file instead of a driver, so that tests can run the real NVML path.
 *
 * The script is the file named by GPUMEM_NVML_SCRIPT, read again on every call: a test
 * changes what the GPUs report by rewriting it (atomically, by rename). One directive a line,
 * `#` starts a comment, blank lines are ignored:
 *
 *   gpu <index> <uuid> <total_bytes> <used_bytes> <reserved_bytes> <name words...>
 *   proc <gpu_index> <pid> <used_bytes>
 *   fail <call> <gpu_index|*> <nvml_return_code>
 *   sleep <call> <gpu_index|*> <milliseconds>
 *
 * <call>: init, count, handle, uuid, name, memory (both memory calls), processes. init and
 * count concern no GPU and take `*`. The first matching fail line and the first matching
 * sleep line apply; a call sleeps first, then fails or answers with what the script said when
 * it began. Sleeping holds no lock: calls to other GPUs go on meanwhile.
 *
 * No script (unset, unreadable): init answers NVML_ERROR_DRIVER_NOT_LOADED and every other
 * call NVML_ERROR_UNINITIALIZED, as without a driver. A malformed script: every call answers
 * NVML_ERROR_UNKNOWN, and one line on stderr names the line (once per distinct message).
 *
 * Not exported, so that callers see them as missing (nvml-wrapper: not supported): PCI info,
 * MIG mode, graphics processes, and everything else NVML has.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

/* ---- The NVML ABI (nvml.h) ------------------------------------------------------------- */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* What the _v3 process queries fill (nvmlProcessInfo_v2_t in nvml.h). */
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

#define NO_INSTANCE 0xFFFFFFFFu

/* ---- The script ------------------------------------------------------------------------ */

#define MAX_GPUS 16
#define MAX_PROCS 64 /* per GPU */
#define MAX_RULES 64
#define MAX_SCRIPT (256 * 1024)
#define TEXT_LEN 96 /* NVML's UUID and name buffers (v2 sizes) */
#define MAX_WORDS 64

/* The calls a script names, then the ones it cannot. */
enum call {
    INIT, COUNT, HANDLE, UUID, NAME, MEMORY, PROCESSES,
    NAMED_CALLS,
    OTHER = NAMED_CALLS /* the driver version: no script names it */
};
static const char *const call_names[NAMED_CALLS] = {
    "init", "count", "handle", "uuid", "name", "memory", "processes",
};

#define NO_GPU (-1)       /* a call that concerns no GPU; a rule's `*` */
#define BAD_GPU MAX_GPUS  /* a handle or index no GPU can have */

struct proc {
    unsigned int pid;
    unsigned long long used;
};

struct gpu {
    int listed;
    int line; /* of its gpu line, or of its first proc line while it has none */
    char uuid[TEXT_LEN];
    char name[TEXT_LEN];
    unsigned long long total, used, reserved;
    unsigned int nprocs;
    struct proc procs[MAX_PROCS];
};

struct rule {
    int sleep; /* a sleep rule, else a fail rule */
    enum call call;
    int gpu; /* NO_GPU: every GPU */
    unsigned long value;
    int line;
};

struct script {
    unsigned int ngpus;
    struct gpu gpus[MAX_GPUS];
    unsigned int nrules;
    struct rule rules[MAX_RULES];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Under the lock: the script as last read, init calls not yet shut down, the last warning. */
static struct script script;
static char text[MAX_SCRIPT + 2];
static unsigned int inits;
static unsigned long last_warning;
static int warned;

/* One line on stderr, unless it is the one printed last. */
static void warn(const char *fmt, ...)
{
    char msg[512];
    unsigned long h = 5381;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (const char *p = msg; *p; p++)
        h = h * 33 + (unsigned char)*p;
    if (warned && h == last_warning)
        return;
    warned = 1;
    last_warning = h;
    fprintf(stderr, "nvml-standin: %s\n", msg);
    fflush(stderr);
}

/* A decimal number, all of `s`, at most `max`. */
static int number(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    unsigned long long v;
    if (s == NULL || *s < '0' || *s > '9')
        return 0;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return 0;
    *out = v;
    return 1;
}

static int call_named(const char *s)
{
    for (int c = 0; c < NAMED_CALLS; c++)
        if (strcmp(s, call_names[c]) == 0)
            return c;
    return -1;
}

/* Parse one line's words into `s`; NULL, or why the line is wrong. */
static const char *directive(struct script *s, char **w, int n, int line)
{
    unsigned long long a, b, c, d;
    if (strcmp(w[0], "gpu") == 0) {
        struct gpu *g;
        size_t len = 0;
        if (n < 7)
            return "expected: gpu <index> <uuid> <total_bytes> <used_bytes> <reserved_bytes> "
                   "<name...>";
        if (!number(w[1], MAX_GPUS - 1, &a))
            return "the GPU index is not a number from 0 to 15";
        if (strlen(w[2]) >= TEXT_LEN)
            return "the uuid is longer than 95 bytes";
        if (!number(w[3], ULLONG_MAX, &b) || !number(w[4], ULLONG_MAX, &c) ||
            !number(w[5], ULLONG_MAX, &d))
            return "total, used and reserved bytes must be numbers";
        if (c > b || d > b - c)
            return "used + reserved bytes exceed the total";
        g = &s->gpus[a];
        if (g->listed)
            return "a second gpu line for this index";
        g->listed = 1;
        g->line = line;
        strcpy(g->uuid, w[2]);
        g->total = b;
        g->used = c;
        g->reserved = d;
        g->name[0] = '\0';
        for (int i = 6; i < n; i++) {
            size_t wl = strlen(w[i]);
            if (len + (i > 6) + wl >= TEXT_LEN)
                return "the name is longer than 95 bytes";
            if (i > 6)
                g->name[len++] = ' ';
            memcpy(g->name + len, w[i], wl + 1);
            len += wl;
        }
        s->ngpus++;
        return NULL;
    }
    if (strcmp(w[0], "proc") == 0) {
        struct gpu *g;
        if (n != 4)
            return "expected: proc <gpu_index> <pid> <used_bytes>";
        if (!number(w[1], MAX_GPUS - 1, &a))
            return "the GPU index is not a number from 0 to 15";
        if (!number(w[2], UINT_MAX, &b) || !number(w[3], ULLONG_MAX, &c))
            return "pid and used bytes must be numbers";
        g = &s->gpus[a];
        if (g->nprocs == MAX_PROCS)
            return "more than 64 processes on one GPU";
        if (!g->listed && g->nprocs == 0)
            g->line = line;
        g->procs[g->nprocs].pid = (unsigned int)b;
        g->procs[g->nprocs].used = c;
        g->nprocs++;
        return NULL;
    }
    if (strcmp(w[0], "fail") == 0 || strcmp(w[0], "sleep") == 0) {
        struct rule *r;
        int sleep = w[0][0] == 's';
        int call, gpu = NO_GPU;
        if (n != 4)
            return sleep ? "expected: sleep <call> <gpu_index|*> <milliseconds>"
                         : "expected: fail <call> <gpu_index|*> <nvml_return_code>";
        call = call_named(w[1]);
        if (call < 0)
            return "the call is not one of init, count, handle, uuid, name, memory, processes";
        if (strcmp(w[2], "*") != 0) {
            if (call == INIT || call == COUNT)
                return "init and count concern no GPU: give * for the GPU";
            if (!number(w[2], MAX_GPUS - 1, &a))
                return "the GPU is not * or a number from 0 to 15";
            gpu = (int)a;
        }
        if (!number(w[3], sleep ? 3600000 : INT_MAX, &c))
            return sleep ? "the milliseconds are not a number (at most an hour)"
                         : "the return code is not a number";
        if (s->nrules == MAX_RULES)
            return "more than 64 fail and sleep lines";
        r = &s->rules[s->nrules++];
        r->sleep = sleep;
        r->call = (enum call)call;
        r->gpu = gpu;
        r->value = (unsigned long)c;
        r->line = line;
        return NULL;
    }
    return "not a directive (gpu, proc, fail, sleep)";
}

/* Parse the `len` bytes at `t` (NUL-terminated, cut up in place) into `s`: NVML_SUCCESS or
 * NVML_ERROR_UNKNOWN, with the reason on stderr. */
static nvmlReturn_t parse(struct script *s, char *t, size_t len, const char *path)
{
    int line = 0;
    memset(s, 0, sizeof *s);
    if (memchr(t, '\0', len) != NULL) {
        warn("%s: a NUL byte: not a script", path);
        return NVML_ERROR_UNKNOWN;
    }
    for (char *next = t; next != NULL;) {
        char *l = next, *hash, *save = NULL, *w[MAX_WORDS + 1];
        char shown[104];
        const char *why;
        int n = 0;
        line++;
        next = strchr(l, '\n');
        if (next != NULL)
            *next++ = '\0';
        if ((hash = strchr(l, '#')) != NULL)
            *hash = '\0';
        snprintf(shown, sizeof shown, "%.100s", l); /* enough to recognise it */
        for (char *tok = strtok_r(l, " \t\r\v\f", &save); tok != NULL;
             tok = strtok_r(NULL, " \t\r\v\f", &save)) {
            if (n == MAX_WORDS + 1)
                break;
            w[n++] = tok;
        }
        if (n == 0)
            continue;
        why = n > MAX_WORDS ? "too many words" : directive(s, w, n, line);
        if (why != NULL) {
            warn("%s:%d: %s: %s", path, line, why, shown);
            return NVML_ERROR_UNKNOWN;
        }
    }
    for (int i = 0; i < MAX_GPUS; i++) {
        const struct gpu *g = &s->gpus[i];
        if (g->listed && (unsigned int)i >= s->ngpus) {
            warn("%s:%d: GPU %d among %u gpu lines: GPUs are numbered 0 to n-1", path, g->line,
                 i, s->ngpus);
            return NVML_ERROR_UNKNOWN;
        }
        if (!g->listed && g->nprocs > 0) {
            warn("%s:%d: a process on GPU %d, which no gpu line lists", path, g->line, i);
            return NVML_ERROR_UNKNOWN;
        }
    }
    for (unsigned int k = 0; k < s->nrules; k++) {
        const struct rule *r = &s->rules[k];
        if (r->gpu != NO_GPU && !s->gpus[r->gpu].listed) {
            warn("%s:%d: GPU %d, which no gpu line lists", path, r->line, r->gpu);
            return NVML_ERROR_UNKNOWN;
        }
    }
    return NVML_SUCCESS;
}

/* Read the script again: NVML_SUCCESS, NVML_ERROR_DRIVER_NOT_LOADED (none) or
 * NVML_ERROR_UNKNOWN (malformed). Under the lock. */
static nvmlReturn_t load(void)
{
    const char *path = getenv("GPUMEM_NVML_SCRIPT");
    FILE *f;
    size_t len;
    int err;
    if (path == NULL || *path == '\0') {
        warn("GPUMEM_NVML_SCRIPT is not set: no driver");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        warn("cannot read %s (%s): no driver", path, strerror(errno));
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    len = fread(text, 1, MAX_SCRIPT + 1, f);
    err = ferror(f);
    fclose(f);
    if (err) {
        warn("cannot read %s: no driver", path);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (len > MAX_SCRIPT) {
        warn("%s: larger than 256 KiB: not a script", path);
        return NVML_ERROR_UNKNOWN;
    }
    text[len] = '\0';
    return parse(&script, text, len, path);
}

static void nap(unsigned long ms)
{
    struct timespec left = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

/*
 * What every call does first: read the script, find the call's answer code, copy what the
 * caller needs (the GPU `gpu`, the number of GPUs) and, after the lock is released, sleep as
 * the script says. The caller answers only when this returns NVML_SUCCESS.
 */
static nvmlReturn_t begin(enum call c, int gpu, struct gpu *copy, unsigned int *ngpus)
{
    unsigned long sleep_ms = 0;
    nvmlReturn_t rc;
    int slept = 0, failed = 0;
    pthread_mutex_lock(&lock);
    rc = load();
    if (rc == NVML_ERROR_DRIVER_NOT_LOADED && c != INIT)
        rc = NVML_ERROR_UNINITIALIZED;
    else if (rc == NVML_SUCCESS && c != INIT && inits == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else if (rc == NVML_SUCCESS && gpu != NO_GPU && (gpu < 0 || (unsigned int)gpu >= script.ngpus))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        for (unsigned int k = 0; k < script.nrules; k++) {
            const struct rule *r = &script.rules[k];
            if (r->call != c || (r->gpu != NO_GPU && r->gpu != gpu))
                continue;
            if (r->sleep && !slept) {
                slept = 1;
                sleep_ms = r->value;
            } else if (!r->sleep && !failed) {
                failed = 1;
                rc = (nvmlReturn_t)r->value;
            }
        }
        if (rc == NVML_SUCCESS && copy != NULL)
            *copy = script.gpus[gpu];
        if (ngpus != NULL)
            *ngpus = script.ngpus;
        if (c == INIT && rc == NVML_SUCCESS)
            inits++;
    }
    pthread_mutex_unlock(&lock);
    if (sleep_ms > 0)
        nap(sleep_ms);
    return rc;
}

/* The GPU a handle stands for (handles are index + 1), BAD_GPU for one that is not. */
static int gpu_of(nvmlDevice_t device)
{
    uintptr_t h = (uintptr_t)device;
    return h >= 1 && h <= MAX_GPUS ? (int)(h - 1) : BAD_GPU;
}

static nvmlReturn_t copy_text(const char *s, char *buf, unsigned int length)
{
    size_t n = strlen(s);
    if (buf == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (n >= length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, n + 1);
    return NVML_SUCCESS;
}

/* ---- The exported calls ---------------------------------------------------------------- */

API nvmlReturn_t nvmlInit_v2(void)
{
    return begin(INIT, NO_GPU, NULL, NULL);
}

API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return begin(INIT, NO_GPU, NULL, NULL);
}

API nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&lock);
    if (inits == 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        inits--;
    pthread_mutex_unlock(&lock);
    return rc;
}

API const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t rc = begin(OTHER, NO_GPU, NULL, NULL);
    return rc != NVML_SUCCESS ? rc : copy_text("580.00-standin", version, length);
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    unsigned int n = 0;
    nvmlReturn_t rc = begin(COUNT, NO_GPU, NULL, &n);
    if (rc != NVML_SUCCESS)
        return rc;
    if (deviceCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = n;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    int gpu = index < MAX_GPUS ? (int)index : BAD_GPU;
    nvmlReturn_t rc = begin(HANDLE, gpu, NULL, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(uintptr_t)(index + 1);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct gpu g;
    nvmlReturn_t rc = begin(UUID, gpu_of(device), &g, NULL);
    return rc != NVML_SUCCESS ? rc : copy_text(g.uuid, uuid, length);
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct gpu g;
    nvmlReturn_t rc = begin(NAME, gpu_of(device), &g, NULL);
    return rc != NVML_SUCCESS ? rc : copy_text(g.name, name, length);
}

/* v1: used counts the driver's reservation. */
API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct gpu g;
    nvmlReturn_t rc = begin(MEMORY, gpu_of(device), &g, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = g.total;
    memory->used = g.used + g.reserved;
    memory->free = g.total - g.used - g.reserved;
    return NVML_SUCCESS;
}

/* v2: used without the reservation, which has a field of its own. */
API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    struct gpu g;
    nvmlReturn_t rc = begin(MEMORY, gpu_of(device), &g, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = g.total;
    memory->reserved = g.reserved;
    memory->used = g.used;
    memory->free = g.total - g.reserved - g.used;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                         unsigned int *infoCount,
                                                         nvmlProcessInfo_t *infos)
{
    struct gpu g;
    nvmlReturn_t rc = begin(PROCESSES, gpu_of(device), &g, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (infoCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (infos == NULL || *infoCount < g.nprocs) {
        *infoCount = g.nprocs;
        return g.nprocs > 0 ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned int i = 0; i < g.nprocs; i++) {
        infos[i].pid = g.procs[i].pid;
        infos[i].usedGpuMemory = g.procs[i].used;
        infos[i].gpuInstanceId = NO_INSTANCE;
        infos[i].computeInstanceId = NO_INSTANCE;
    }
    *infoCount = g.nprocs;
    return NVML_SUCCESS;
}

/* A stand-in for the libcuda entry points tilelab's native launch module binds, for
 * tests without a GPU: it logs each call and returns the error codes a test sets. */
#include <stdint.h>

#define LOG 16384
static uint64_t calls[LOG][7]; /* function, gx, gy, gz, stream, params, pdl attribute */
static int launches, syncs, error, sync_error;
static uint64_t last_synced;

/* cuLaunchKernelEx's configuration as cuda.h lays it out */
typedef struct { int id; char pad[4]; union { char b[64]; int allowed; } value; } attr_t;
typedef struct {
    unsigned grid[3], block[3], shmem;
    void *stream;
    attr_t *attrs;
    unsigned num_attrs;
} config_t;

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shmem, void *stream, void **params,
                   void **extra) {
    if (bx != 1 || by != 1 || bz != 1 || shmem != 0 || extra != 0) return 1;
    if (error) return error;
    uint64_t *c = calls[launches % LOG];
    c[0] = (uint64_t)(uintptr_t)f;
    c[1] = gx; c[2] = gy; c[3] = gz;
    c[4] = (uint64_t)(uintptr_t)stream;
    c[5] = (uint64_t)(uintptr_t)params;
    c[6] = 0;
    launches++;
    return 0;
}

/* logs like cuLaunchKernel, with field 6 = the programmatic-stream-serialization
 * attribute's value (id 6), or 99 for any other attribute */
int cuLaunchKernelEx(const config_t *cfg, void *f, void **params, void **extra) {
    if (cfg->block[0] != 1 || cfg->block[1] != 1 || cfg->block[2] != 1 || cfg->shmem != 0
        || extra != 0)
        return 1;
    if (error) return error;
    uint64_t *c = calls[launches % LOG];
    c[0] = (uint64_t)(uintptr_t)f;
    c[1] = cfg->grid[0]; c[2] = cfg->grid[1]; c[3] = cfg->grid[2];
    c[4] = (uint64_t)(uintptr_t)cfg->stream;
    c[5] = (uint64_t)(uintptr_t)params;
    c[6] = 0;
    for (unsigned i = 0; i < cfg->num_attrs; i++)
        c[6] = cfg->attrs[i].id == 6 ? (uint64_t)cfg->attrs[i].value.allowed : 99;
    launches++;
    return 0;
}

int cuStreamSynchronize(void *stream) {
    last_synced = (uint64_t)(uintptr_t)stream;
    syncs++;
    return sync_error;
}

/* field j of launch i (the oldest kept is launches - LOG) */
uint64_t fake_call(int i, int j) { return calls[i % LOG][j]; }
int fake_launches(void) { return launches; }
int fake_syncs(void) { return syncs; }
uint64_t fake_last_synced(void) { return last_synced; }
void fake_set_error(int e) { error = e; }
void fake_set_sync_error(int e) { sync_error = e; }
void fake_reset(void) { launches = syncs = error = sync_error = 0; }

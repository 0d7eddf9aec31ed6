/*
 * A warp's 32 lanes on the host, for the warp steps of zstd_blocks.h (the
 * offsets, the execution; test_zstd_blocks.c built with ZB_SIMULATED_LANES):
 * each lane is a coroutine (ucontext) running the kernel's code with its
 * lane number; the warp's exchanges (zb_scan, zb_any, zb_max, zb_ballot,
 * zb_from, zb_up) and ZB_WARP_SYNC are barriers where every lane must
 * arrive, at the same call. Between barriers the lanes run one after
 * another in a random order, so code that reads what another lane writes
 * without a barrier between them gives other bytes from one run to the
 * next, and lanes that reach different exchanges or none (a divergent
 * exchange: undefined, or a hang, on the GPU) fail the test.
 * What it cannot see: on the GPU only __syncwarp orders lanes' memory, not
 * the shuffles and votes; here every exchange does, so a missing
 * ZB_WARP_SYNC before reads of another lane's writes goes unnoticed.
 */
#ifndef H5GDS_ZB_LANES_H
#define H5GDS_ZB_LANES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define ZB_SIM_LANES 32u

typedef void (*zb_lane_fn)(unsigned lane, void *arg);

static struct {
    ucontext_t main, lane[ZB_SIM_LANES];
    char *stack[ZB_SIM_LANES];
    uint32_t slot[2][ZB_SIM_LANES]; /* by barrier parity: a lane writes the next while others read this one */
    unsigned barriers[ZB_SIM_LANES]; /* barriers each lane has passed */
    int site[ZB_SIM_LANES];          /* the line of the call each lane waits in (zstd_blocks.h) */
    int done[ZB_SIM_LANES];
    unsigned current;
    zb_lane_fn fn;
    void *arg;
    size_t diverged; /* runs where lanes did not all reach the same barrier */
} zb_sim;

/* Lane `current` leaves v for the others at the exchange called on line
 * `site` and waits for every lane. */
static const uint32_t *zb_sim_exchange(int site, uint32_t v)
{
    unsigned me = zb_sim.current, parity = zb_sim.barriers[me] & 1u;
    zb_sim.slot[parity][me] = v;
    zb_sim.site[me] = site;
    swapcontext(&zb_sim.lane[me], &zb_sim.main);
    zb_sim.barriers[me]++;
    return zb_sim.slot[parity];
}


void zb_sim_sync(int line) { (void)zb_sim_exchange(line, 0); }

zs_u32 zb_sim_scan(zs_u32 v, zs_u32 *total, unsigned lane, int line)
{
    const uint32_t *all = zb_sim_exchange(line, v);
    zs_u32 below = 0, sum = 0;
    for (unsigned k = 0; k < ZB_SIM_LANES; k++) {
        below += k < lane ? all[k] : 0;
        sum += all[k];
    }
    *total = sum;
    return below;
}

int zb_sim_any(int v, int line)
{
    const uint32_t *all = zb_sim_exchange(line, v != 0);
    for (unsigned k = 0; k < ZB_SIM_LANES; k++)
        if (all[k])
            return 1;
    return 0;
}

zs_u32 zb_sim_max(zs_u32 v, int line)
{
    const uint32_t *all = zb_sim_exchange(line, v);
    zs_u32 m = 0;
    for (unsigned k = 0; k < ZB_SIM_LANES; k++)
        m = all[k] > m ? all[k] : m;
    return m;
}

zs_u32 zb_sim_ballot(int v, int line)
{
    const uint32_t *all = zb_sim_exchange(line, v != 0);
    zs_u32 bits = 0;
    for (unsigned k = 0; k < ZB_SIM_LANES; k++)
        bits |= all[k] ? 1u << k : 0u;
    return bits;
}

zs_u32 zb_sim_from(zs_u32 v, unsigned from, int line) { return zb_sim_exchange(line, v)[from % ZB_SIM_LANES]; }

zs_u32 zb_sim_up(zs_u32 v, unsigned by, int line)
{
    unsigned me = zb_sim.current;
    const uint32_t *all = zb_sim_exchange(line, v);
    return me >= by ? all[me - by] : v;
}

static void zb_sim_entry(unsigned lane)
{
    zb_sim.fn(lane, zb_sim.arg);
    zb_sim.done[lane] = 1;
}

/* Runs fn(lane, arg) on 32 lanes to the end; 0, or -1 if the lanes did
 * not all pass the same barriers (the kernel would hang or misbehave). */
static int zb_sim_run(zb_lane_fn fn, void *arg)
{
    enum { STACK = 256 * 1024 };
    zb_sim.fn = fn;
    zb_sim.arg = arg;
    for (unsigned l = 0; l < ZB_SIM_LANES; l++) {
        if (!zb_sim.stack[l])
            zb_sim.stack[l] = malloc(STACK);
        getcontext(&zb_sim.lane[l]);
        zb_sim.lane[l].uc_stack.ss_sp = zb_sim.stack[l];
        zb_sim.lane[l].uc_stack.ss_size = STACK;
        zb_sim.lane[l].uc_link = &zb_sim.main;
        makecontext(&zb_sim.lane[l], (void (*)(void))zb_sim_entry, 1, l);
        zb_sim.barriers[l] = 0;
        zb_sim.done[l] = 0;
    }
    for (;;) {
        unsigned order[ZB_SIM_LANES];
        for (unsigned l = 0; l < ZB_SIM_LANES; l++)
            order[l] = l;
        for (unsigned l = ZB_SIM_LANES - 1; l > 0; l--) { /* a new order each round */
            unsigned j = (unsigned)(rng() % (l + 1)), t = order[l];
            order[l] = order[j];
            order[j] = t;
        }
        for (unsigned i = 0; i < ZB_SIM_LANES; i++) {
            unsigned l = order[i];
            if (zb_sim.done[l])
                continue;
            zb_sim.current = l;
            swapcontext(&zb_sim.main, &zb_sim.lane[l]);
        }
        unsigned finished = 0;
        for (unsigned l = 0; l < ZB_SIM_LANES; l++)
            finished += zb_sim.done[l] != 0;
        if (finished == ZB_SIM_LANES)
            return 0;
        if (finished) { /* some lanes ended while others wait at a barrier */
            zb_sim.diverged++;
            return -1;
        }
        for (unsigned l = 1; l < ZB_SIM_LANES; l++)
            if (zb_sim.site[l] != zb_sim.site[0]) { /* lanes at different exchanges */
                zb_sim.diverged++;
                return -1;
            }
    }
}

#endif

// Source of the PTX in gpu_kernels.h (regenerate: see that file).
// spin_fill: waits `ns` nanoseconds of GPU time, then writes `value` into
// n 32-bit words: a kernel that produces data late, to test how the driver
// orders its copies against the application's streams.
extern "C" __global__ void spin_fill(unsigned *buf, unsigned long long n, unsigned long long ns, unsigned value)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        buf[i] = value ^ (unsigned)(i * 2654435761u);
}

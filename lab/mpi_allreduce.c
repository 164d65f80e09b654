/* The lab's baseline: MPI_Allreduce of MPICH, as a user runs it today, timed the way
 * `topoc lab` times the compiled schedule (one warm-up run, then each timed run after a
 * barrier, the slowest rank's time), on the same inputs (`runtime_lite::inputs` is not
 * reproduced here: the baseline's result is checked against a closed form instead).
 *
 * Usage: mpi_allreduce ELEMENTS RUNS
 * Prints, on rank 0: `done SECONDS` per timed run, then `check ok` or `check FAILED`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: mpi_allreduce ELEMENTS RUNS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long n = atol(argv[1]);
    int runs = atoi(argv[2]);
    if (n <= 0 || n > (1L << 28) || runs <= 0 || runs > 1000) {
        if (rank == 0) fprintf(stderr, "ELEMENTS must be in 1..2^28 and RUNS in 1..1000\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 3);
    /* Small integers: every sum is exact in f32, whatever order MPI adds in. */
    for (long i = 0; i < n; i++) in[i] = (float)((rank + i) % 16);
    for (int r = 0; r <= runs; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double mine = MPI_Wtime() - t0, slowest;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0 && r > 0) printf("done %.9f\n", slowest);
    }
    int bad = 0;
    for (long i = 0; i < n; i++) {
        long want = 0;
        for (int k = 0; k < size; k++) want += (k + i) % 16;
        if (out[i] != (float)want) { bad = 1; break; }
    }
    int any;
    MPI_Reduce(&bad, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("check %s\n", any ? "FAILED" : "ok");
    fflush(stdout);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}

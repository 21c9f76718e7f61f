/* The collectives ddpsim's engines time, run by SimGrid's SMPI: an independent implementation
   of the same rings, message by message, on the same platform file. For each size in bytes on
   the command line, prints the slowest rank's MPI_Allgather, MPI_Reduce_scatter and
   MPI_Allreduce time in ms (each after a barrier). Buffers are SMPI's shared allocations: no
   real memory per rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int a = 1; a < argc; ++a) {
    const long bytes = atol(argv[a]);
    const int share = (int)(bytes / size);
    char* send = SMPI_SHARED_MALLOC((size_t)bytes);
    char* recv = SMPI_SHARED_MALLOC((size_t)bytes);
    int* counts = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; ++i) counts[i] = share;
    double took[3];
    for (int c = 0; c < 3; ++c) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      if (c == 0) MPI_Allgather(send, share, MPI_CHAR, recv, share, MPI_CHAR, MPI_COMM_WORLD);
      if (c == 1) MPI_Reduce_scatter(send, recv, counts, MPI_CHAR, MPI_BOR, MPI_COMM_WORLD);
      if (c == 2) MPI_Allreduce(send, recv, (int)bytes, MPI_CHAR, MPI_BOR, MPI_COMM_WORLD);
      took[c] = (MPI_Wtime() - start) * 1e3;
    }
    double slowest[3];
    MPI_Reduce(took, slowest, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.9g %.9g %.9g\n", bytes, slowest[0], slowest[1], slowest[2]);
    SMPI_SHARED_FREE(send);
    SMPI_SHARED_FREE(recv);
    free(counts);
  }
  MPI_Finalize();
  return 0;
}

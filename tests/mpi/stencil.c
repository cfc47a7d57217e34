/* stencil: a 2-D Jacobi solver on a Cartesian process grid, as found in
 * every MPI course. MPI_Dims_create picks the grid, MPI_Cart_create builds
 * it (rows fixed at the boundary, columns periodic), MPI_Cart_shift finds
 * the neighbours (MPI_PROC_NULL past the fixed edges), and each step
 * exchanges halos with MPI_Sendrecv: rows as contiguous doubles, columns
 * as an MPI_Type_vector. The residual (largest change) is an MPI_Allreduce
 * with MPI_MAX. Every rank also runs the whole grid serially: each point
 * is the same expression of the same neighbours, so the parallel result
 * must equal it bit for bit, every step's residual too. */
#include "mpitest.h"

#define NX 6 /* local rows */
#define NY 5 /* local columns */
#define STEPS 25

static double boundary(int gi, int gj) {
  return (double)((gi * 7 + gj * 3) % 11);
}
static double initial(int gi, int gj) {
  return (double)((gi * 13 + gj * 5) % 17) * 0.25;
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int dims[2] = {0, 0}, periods[2] = {0, 1}, coords[2];
  MPI_Dims_create(size, 2, dims);
  CHECK_EQ(dims[0] * dims[1], size);
  CHECK(dims[0] >= dims[1]);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  int crank;
  MPI_Comm_rank(cart, &crank);
  MPI_Cart_coords(cart, crank, 2, coords);
  CHECK_EQ(crank, coords[0] * dims[1] + coords[1]); /* row-major */
  int back;
  MPI_Cart_rank(cart, coords, &back);
  CHECK_EQ(back, crank);
  int wrap[2] = {coords[0], coords[1] - dims[1]}; /* periodic: wraps */
  MPI_Cart_rank(cart, wrap, &back);
  CHECK_EQ(back, crank);

  int up, down, left, right;
  MPI_Cart_shift(cart, 0, 1, &up, &down);
  MPI_Cart_shift(cart, 1, 1, &left, &right);
  CHECK_EQ(up, coords[0] == 0 ? MPI_PROC_NULL : crank - dims[1]);
  CHECK_EQ(down, coords[0] == dims[0] - 1 ? MPI_PROC_NULL : crank + dims[1]);
  CHECK_EQ(left, coords[0] * dims[1] + (coords[1] + dims[1] - 1) % dims[1]);
  CHECK_EQ(right, coords[0] * dims[1] + (coords[1] + 1) % dims[1]);

  /* the whole grid, GX x GY, with a halo of one: rows 0 and GX + 1 are
   * the fixed boundary, columns wrap */
  int GX = dims[0] * NX, GY = dims[1] * NY, W = GY + 2;
  double *g = malloc(sizeof(double) * (GX + 2) * W),
         *gn = malloc(sizeof(double) * (GX + 2) * W);
  CHECK(g && gn);
  for (int i = 0; i < GX + 2; i++)
    for (int j = 1; j <= GY; j++)
      g[i * W + j] = (i == 0 || i == GX + 1) ? boundary(i, j) : initial(i, j);
  memcpy(gn, g, sizeof(double) * (GX + 2) * W);

  /* my block, rows i0+1..i0+NX and columns j0+1..j0+NY of the grid */
  int i0 = coords[0] * NX, j0 = coords[1] * NY, w = NY + 2;
  double u[(NX + 2) * (NY + 2)], un[(NX + 2) * (NY + 2)];
  for (int i = 0; i < NX + 2; i++)
    for (int j = 0; j < NY + 2; j++) u[i * w + j] = -1e9;
  for (int i = 1; i <= NX; i++)
    for (int j = 1; j <= NY; j++) u[i * w + j] = g[(i0 + i) * W + j0 + j];
  if (up == MPI_PROC_NULL) /* receives leave these alone */
    for (int j = 1; j <= NY; j++) u[j] = g[j0 + j];
  if (down == MPI_PROC_NULL)
    for (int j = 1; j <= NY; j++)
      u[(NX + 1) * w + j] = g[(GX + 1) * W + j0 + j];

  MPI_Datatype column;
  MPI_Type_vector(NX, 1, w, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);

  for (int step = 0; step < STEPS; step++) {
    /* halos: my first row goes up while my bottom halo comes from
     * below, and so on for the four directions */
    MPI_Sendrecv(&u[1 * w + 1], NY, MPI_DOUBLE, up, 0, &u[(NX + 1) * w + 1], NY,
                 MPI_DOUBLE, down, 0, cart, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[NX * w + 1], NY, MPI_DOUBLE, down, 1, &u[0 * w + 1], NY,
                 MPI_DOUBLE, up, 1, cart, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[1 * w + 1], 1, column, left, 2, &u[1 * w + NY + 1], 1,
                 column, right, 2, cart, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[1 * w + NY], 1, column, right, 3, &u[1 * w + 0], 1, column,
                 left, 3, cart, MPI_STATUS_IGNORE);
    double res = 0, gres = 0, sres = 0;
    for (int i = 1; i <= NX; i++)
      for (int j = 1; j <= NY; j++) {
        double v = 0.25 * (u[(i - 1) * w + j] + u[(i + 1) * w + j] +
                           u[i * w + j - 1] + u[i * w + j + 1]);
        double d = v > u[i * w + j] ? v - u[i * w + j] : u[i * w + j] - v;
        res = d > res ? d : res;
        un[i * w + j] = v;
      }
    for (int i = 1; i <= NX; i++)
      for (int j = 1; j <= NY; j++) u[i * w + j] = un[i * w + j];
    MPI_Allreduce(&res, &gres, 1, MPI_DOUBLE, MPI_MAX, cart);

    /* the serial step on the whole grid */
    for (int i = 1; i <= GX; i++) {
      g[i * W] = g[i * W + GY];
      g[i * W + GY + 1] = g[i * W + 1];
    }
    for (int i = 1; i <= GX; i++)
      for (int j = 1; j <= GY; j++) {
        double v = 0.25 * (g[(i - 1) * W + j] + g[(i + 1) * W + j] +
                           g[i * W + j - 1] + g[i * W + j + 1]);
        double d = v > g[i * W + j] ? v - g[i * W + j] : g[i * W + j] - v;
        sres = d > sres ? d : sres;
        gn[i * W + j] = v;
      }
    for (int i = 1; i <= GX; i++)
      for (int j = 1; j <= GY; j++) g[i * W + j] = gn[i * W + j];
    CHECK(gres == sres);
    for (int i = 1; i <= NX; i++)
      for (int j = 1; j <= NY; j++)
        CHECK(u[i * w + j] == g[(i0 + i) * W + j0 + j]);
    if (crank == 0 && (step == 0 || step == STEPS - 1))
      printf("stencil: %dx%d ranks, %dx%d grid, step %d residual %.17g\n",
             dims[0], dims[1], GX, GY, step, gres);
  }

  MPI_Type_free(&column);
  MPI_Comm_free(&cart);
  free(g);
  free(gn);
  mt_ok("stencil");
  MPI_Finalize();
  return 0;
}

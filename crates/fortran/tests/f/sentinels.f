! Fixed-form program with mpif.h: derived types with MPI_BOTTOM, nonblocking with
! MPI_STATUSES_IGNORE, collectives with MPI_IN_PLACE.
      PROGRAM SENTIN
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER IERR, RANK, NP, I, NEWT, PEER
      INTEGER IA, IB(3)
      DOUBLE PRECISION DA
      INTEGER(KIND=MPI_ADDRESS_KIND) DISP(2)
      INTEGER BLENS(2), TYPES(2), REQS(2)
      INTEGER SBUF(4), RBUF(4), V(3)
      INTEGER STATS(MPI_STATUS_SIZE, 2)

      CALL MPI_INIT(IERR)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, RANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, NP, IERR)
C     A struct type of absolute addresses, sent from MPI_BOTTOM.
      CALL MPI_GET_ADDRESS(IA, DISP(1), IERR)
      CALL MPI_GET_ADDRESS(DA, DISP(2), IERR)
      BLENS(1) = 1
      BLENS(2) = 1
      TYPES(1) = MPI_INTEGER
      TYPES(2) = MPI_DOUBLE_PRECISION
      CALL MPI_TYPE_CREATE_STRUCT(2, BLENS, DISP, TYPES, NEWT, IERR)
      CALL MPI_TYPE_COMMIT(NEWT, IERR)
      IF (RANK .EQ. 0) THEN
         IA = 17
         DA = 2.5D0
      ELSE
         IA = 0
         DA = 0D0
      END IF
      CALL MPI_BCAST(MPI_BOTTOM, 1, NEWT, 0, MPI_COMM_WORLD, IERR)
C     IA and DA changed behind the optimiser's back (MPI-3.0 17.1.17).
      CALL MPI_F_SYNC_REG(IA)
      CALL MPI_F_SYNC_REG(DA)
      IF (IA .NE. 17 .OR. DA .NE. 2.5D0) THEN
         PRINT *, 'BOTTOM BCAST BAD', IA, DA
         CALL MPI_ABORT(MPI_COMM_WORLD, 1, IERR)
      END IF
      CALL MPI_TYPE_FREE(NEWT, IERR)
C     Nonblocking exchange with the neighbour, MPI_STATUSES_IGNORE.
      PEER = MOD(RANK + 1, NP)
      DO I = 1, 4
         SBUF(I) = RANK * 10 + I
      END DO
      CALL MPI_IRECV(RBUF, 4, MPI_INTEGER, MOD(RANK + NP - 1, NP), 3,
     &     MPI_COMM_WORLD, REQS(1), IERR)
      CALL MPI_ISEND(SBUF, 4, MPI_INTEGER, PEER, 3, MPI_COMM_WORLD,
     &     REQS(2), IERR)
      CALL MPI_WAITALL(2, REQS, MPI_STATUSES_IGNORE, IERR)
      IF (RBUF(4) .NE. MOD(RANK + NP - 1, NP) * 10 + 4) THEN
         CALL MPI_ABORT(MPI_COMM_WORLD, 2, IERR)
      END IF
      IF (REQS(1) .NE. MPI_REQUEST_NULL) THEN
         CALL MPI_ABORT(MPI_COMM_WORLD, 3, IERR)
      END IF
C     The same with statuses.
      CALL MPI_IRECV(RBUF, 4, MPI_INTEGER, MOD(RANK + NP - 1, NP), 4,
     &     MPI_COMM_WORLD, REQS(1), IERR)
      CALL MPI_ISEND(SBUF, 4, MPI_INTEGER, PEER, 4, MPI_COMM_WORLD,
     &     REQS(2), IERR)
      CALL MPI_WAITALL(2, REQS, STATS, IERR)
      IF (STATS(MPI_SOURCE, 1) .NE. MOD(RANK + NP - 1, NP)
     &     .OR. STATS(MPI_TAG, 1) .NE. 4) THEN
         CALL MPI_ABORT(MPI_COMM_WORLD, 4, IERR)
      END IF
C     Allreduce and gather in place.
      V(1) = RANK
      V(2) = 1
      V(3) = -RANK
      CALL MPI_ALLREDUCE(MPI_IN_PLACE, V, 3, MPI_INTEGER, MPI_SUM,
     &     MPI_COMM_WORLD, IERR)
      IF (V(1) .NE. NP * (NP - 1) / 2 .OR. V(2) .NE. NP) THEN
         PRINT *, 'IN_PLACE ALLREDUCE BAD', V
         CALL MPI_ABORT(MPI_COMM_WORLD, 5, IERR)
      END IF
      IB(1) = RANK
      IB(2) = RANK
      IB(3) = RANK
      IF (RANK .EQ. 0) THEN
         CALL MPI_REDUCE(MPI_IN_PLACE, IB, 3, MPI_INTEGER, MPI_MAX, 0,
     &        MPI_COMM_WORLD, IERR)
      ELSE
         CALL MPI_REDUCE(IB, IB, 3, MPI_INTEGER, MPI_MAX, 0,
     &        MPI_COMM_WORLD, IERR)
      END IF
      IF (RANK .EQ. 0 .AND. IB(3) .NE. NP - 1) THEN
         PRINT *, 'IN_PLACE REDUCE BAD', IB
         CALL MPI_ABORT(MPI_COMM_WORLD, 6, IERR)
      END IF
      IF (RANK .EQ. 0) PRINT '(A)', 'sentinels: ok'
      CALL MPI_FINALIZE(IERR)
      END

! mpi.f90: the `mpi` module of strobe (`use mpi`).
!
! The constants, datatypes, sentinels and declarations of mpif.h, in a module. The MPI
! routines themselves have no explicit interfaces (as in MPICH's `mpi` module without
! choice-buffer interfaces): calls are checked by gfortran only against each other, so
! a file that passes buffers of different types to one routine needs
! -fallow-argument-mismatch, which `strobe mpifort` adds.
!
! Compiled to mpi.mod with the Fortran compiler in use, on first use, by `strobe mpifort`
! (into the build tree) or by `strobe install` (into PREFIX/include): a .mod file is
! specific to the compiler version that wrote it.
module mpi
  implicit none
  include 'mpif.h'
end module mpi

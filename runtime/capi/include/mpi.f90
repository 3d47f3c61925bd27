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
  ! MPI_SIZEOF (MPI-3.1 17.1.9): the size in bytes of one element of its first argument,
  ! a scalar or an array of any rank of an intrinsic type: one specific routine per type
  ! and kind (assumed-rank dummies), implemented in libmpi (src/fortran/dtypes.rs) so
  ! that no module object file needs linking.
  interface MPI_SIZEOF
    subroutine mpi_sizeof_i1(x, size, ierror)
      integer(1), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_i1
    subroutine mpi_sizeof_i2(x, size, ierror)
      integer(2), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_i2
    subroutine mpi_sizeof_i4(x, size, ierror)
      integer(4), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_i4
    subroutine mpi_sizeof_i8(x, size, ierror)
      integer(8), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_i8
    subroutine mpi_sizeof_r4(x, size, ierror)
      real(4), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_r4
    subroutine mpi_sizeof_r8(x, size, ierror)
      real(8), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_r8
    subroutine mpi_sizeof_c4(x, size, ierror)
      complex(4), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_c4
    subroutine mpi_sizeof_c8(x, size, ierror)
      complex(8), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_c8
    subroutine mpi_sizeof_l4(x, size, ierror)
      logical, intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_l4
    subroutine mpi_sizeof_ch(x, size, ierror)
      character(len=*), intent(in) :: x(..)
      integer, intent(out) :: size, ierror
    end subroutine mpi_sizeof_ch
  end interface MPI_SIZEOF
end module mpi

//! Node daemons (`strobe node`) and what starts them across hosts (issue 15).
//!
//! [`launch`]: the launchers (local, ssh, MPICH Hydra through PMI-1, Slurm), hostfiles and
//! rank placement.

pub mod launch;

//! Builds the C helpers (long double arithmetic, which Rust has no type for) and makes the
//! shared library export the weak `MPI_*` aliases.
//!
//! rustc links a cdylib with a version script that keeps only Rust `#[no_mangle]` items
//! global; the `MPI_*` weak aliases are defined in `global_asm!` (see `src/abi.rs`), so a
//! second version script lists them as global too. GNU ld and lld merge the two scripts.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=src/longdouble.c");
    println!("cargo:rerun-if-changed=exports.map");
    cc::Build::new()
        .file("src/longdouble.c")
        .warnings(true)
        .compile("strobe_mpi_longdouble");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/exports.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi.so");
}

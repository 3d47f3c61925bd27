//! Builds and inspects `fake_ibverbs.c` (a stand-in for libibverbs.so.1, see its header
//! comment) for the tests that load the libibverbs provider without an RDMA device.
//! Included with `#[path]` by the test files that use it.

use std::ffi::{c_int, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the fake's source is, from the runtime's tests or from another test crate.
fn source() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("tests/support/fake_ibverbs.c"),
        manifest.join("../runtime/tests/support/fake_ibverbs.c"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("runtime/tests/support/fake_ibverbs.c")
}

/// Builds the fake (once per source text: the library is kept in the temporary directory
/// under a name derived from it, built under a private name and renamed into place, so
/// concurrent test processes never load a half-written file). None, with a message, when
/// verbs.h is not installed: scripts/ensure-tools.sh installs libibverbs-dev.
pub fn library() -> Option<PathBuf> {
    static LIB: OnceLock<Option<PathBuf>> = OnceLock::new();
    LIB.get_or_init(|| {
        if !Path::new("/usr/include/infiniband/verbs.h").exists() {
            eprintln!("skipped: no verbs.h (install libibverbs-dev)");
            return None;
        }
        let src = source();
        let text = std::fs::read(&src).unwrap();
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&text, &mut h);
        let dir = std::env::temp_dir().join("strobe-fake-ibverbs");
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join(format!(
            "libfake_ibverbs-{:016x}.so",
            std::hash::Hasher::finish(&h)
        ));
        if lib.exists() {
            return Some(lib);
        }
        let tmp = dir.join(format!("build-{}.so", std::process::id()));
        let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args([
                "-std=gnu11",
                "-O1",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-shared",
                "-fPIC",
            ])
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            .arg("-lpthread")
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "fake_ibverbs.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&tmp, &lib).unwrap();
        Some(lib)
    })
    .clone()
}

/// The fake's counters: (objects freed while still in use, objects not freed yet).
#[allow(dead_code)]
pub fn counters(lib: &Path) -> (c_int, c_int) {
    let path = CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: the fake library is already loaded by the provider (dlopen of the same path
    // returns the same object, never unloaded); its two counter functions take nothing
    // and return an int.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!handle.is_null());
        let get = |name: &str| {
            let sym = libc::dlsym(handle, CString::new(name).unwrap().as_ptr());
            assert!(!sym.is_null(), "{name} missing from the fake");
            let f: extern "C" fn() -> c_int = std::mem::transmute(sym);
            f()
        };
        (get("fake_ibv_errors"), get("fake_ibv_live"))
    }
}

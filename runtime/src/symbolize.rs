//! Turning a rank's call-site words ([`crate::callsite::SiteWords`]) into a source location,
//! in the launcher, while the rank is alive.
//!
//! A code address becomes (object, file offset) through the rank's `/proc/PID/maps`, so
//! neither PIE nor ASLR matters and the pair means the same in every run of the same binary;
//! the object's DWARF (`addr2line`, gimli) then gives function, file and line (the
//! instruction before the return address: the call itself). Without debug information the
//! symbol table still gives the function. A Rust location's file name is read from the
//! rank's memory (cross-memory attach, `procmem`). Results are cached per (pid, words) and
//! objects are parsed once.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::callsite::{RawSite, SiteWords};

/// A resolved call site, as recorded (`call_site` table) and shown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallSite {
    /// The object the call is in (the program, or a shared object), as mapped.
    pub object: String,
    /// The return address as an offset in that file (0 for Rust locations).
    pub offset: u64,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl CallSite {
    /// `deadlock.c:23 (in exchange)`; without debug information `exchange in deadlock+0x1234`.
    pub fn short(&self) -> String {
        let base = |p: &str| {
            Path::new(p)
                .file_name()
                .map_or_else(|| p.to_string(), |f| f.to_string_lossy().into_owned())
        };
        match (&self.file, self.line, &self.function) {
            (Some(f), Some(l), Some(func)) => format!("{}:{l} (in {func})", base(f)),
            (Some(f), Some(l), None) => format!("{}:{l}", base(f)),
            (_, _, Some(func)) => format!("{func} in {}+{:#x}", base(&self.object), self.offset),
            _ => format!("{}+{:#x}", base(&self.object), self.offset),
        }
    }
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

#[derive(Clone)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

struct Object {
    loader: addr2line::Loader,
    /// Loadable segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

/// Resolves call sites of live ranks; one per job (the launcher's node 0).
#[derive(Default)]
pub struct Symbolizer {
    maps: HashMap<i32, Vec<Mapping>>,
    objects: HashMap<String, Option<Object>>,
    cache: HashMap<(i32, SiteWords), Option<Arc<CallSite>>>,
}

impl Symbolizer {
    /// The call site `words` of the rank with process id `pid`; `None` when unknown or the
    /// rank is gone.
    pub fn resolve(&mut self, pid: i32, words: SiteWords) -> Option<Arc<CallSite>> {
        if pid <= 0 {
            return None;
        }
        if let Some(hit) = self.cache.get(&(pid, words)) {
            return hit.clone();
        }
        let site = match words.decode() {
            RawSite::Unknown => None,
            RawSite::Code(addr) => self.code_site(pid, addr),
            RawSite::Rust { file, len, line } => rust_site(pid, file, len, line),
        }
        .map(Arc::new);
        self.cache.insert((pid, words), site.clone());
        site
    }

    fn mapping(&mut self, pid: i32, addr: u64) -> Option<Mapping> {
        let find = |maps: &[Mapping]| {
            maps.iter()
                .find(|m| m.start <= addr && addr < m.end)
                .cloned()
        };
        if let Some(m) = self.maps.get(&pid).and_then(|v| find(v)) {
            return Some(m);
        }
        // Not seen yet (first call, or an object loaded since): read the maps again.
        let maps = read_maps(pid)?;
        let m = find(&maps);
        self.maps.insert(pid, maps);
        m
    }

    fn code_site(&mut self, pid: i32, addr: u64) -> Option<CallSite> {
        let m = self.mapping(pid, addr)?;
        let offset = addr - m.start + m.offset;
        let mut site = CallSite {
            object: m.path.clone(),
            offset,
            ..CallSite::default()
        };
        let obj = self
            .objects
            .entry(m.path.clone())
            .or_insert_with(|| load_object(&m.path));
        if let Some(obj) = obj {
            if let Some(svma) = obj
                .segments
                .iter()
                .find(|(off, size, _)| *off <= offset && offset < off + size)
                .map(|(off, _, vaddr)| vaddr + (offset - off))
            {
                // The return address follows the call instruction: look up the call.
                describe(&obj.loader, svma.saturating_sub(1), &mut site);
            }
        }
        Some(site)
    }
}

fn describe(loader: &addr2line::Loader, probe: u64, site: &mut CallSite) {
    if let Ok(mut frames) = loader.find_frames(probe) {
        if let Ok(Some(frame)) = frames.next() {
            site.function = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok().map(|s| s.into_owned()));
            if let Some(loc) = frame.location {
                site.file = loc.file.map(str::to_string);
                site.line = loc.line;
            }
        }
    }
    if site.function.is_none() {
        site.function = loader
            .find_symbol(probe)
            .map(|s| addr2line::demangle_auto(s.into(), None).into_owned());
    }
}

fn load_object(path: &str) -> Option<Object> {
    let segments = load_segments(path)?;
    let loader = addr2line::Loader::new(path).ok()?;
    Some(Object { loader, segments })
}

/// The loadable segments of a 64-bit ELF file, from its program headers only (the first
/// 64 KiB of the file: never the whole, possibly large, binary).
fn load_segments(path: &str) -> Option<Vec<(u64, u64, u64)>> {
    use object::read::elf::{FileHeader, ProgramHeader};
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    let hdr = object::elf::FileHeader64::<object::Endianness>::parse(&*head).ok()?;
    let e = hdr.endian().ok()?;
    let phdrs = hdr.program_headers(e, &*head).ok()?;
    Some(
        phdrs
            .iter()
            .filter(|ph| ph.p_type(e) == object::elf::PT_LOAD)
            .map(|ph| (ph.p_offset(e), ph.p_filesz(e), ph.p_vaddr(e)))
            .collect(),
    )
}

/// Node 0's per-rank call sites for the slice record: each rank's last words and what they
/// resolved to, so a rank blocked in the same call for many slices costs two loads and a
/// comparison per slice (no hashing).
#[derive(Default)]
pub struct SiteCache {
    sym: Symbolizer,
    last: Vec<Option<LastSite>>,
}

/// A rank's last published words, its pid then, and what they resolved to.
type LastSite = (SiteWords, i32, Option<Arc<CallSite>>);

impl SiteCache {
    /// The call site rank `rank` (process `pid`) published, `words`.
    pub fn site(&mut self, rank: u32, pid: i32, words: SiteWords) -> Option<Arc<CallSite>> {
        let i = rank as usize;
        if i >= self.last.len() {
            self.last.resize(i + 1, None);
        }
        if let Some((w, p, site)) = &self.last[i] {
            if *w == words && *p == pid {
                return site.clone();
            }
        }
        let site = self.sym.resolve(pid, words);
        self.last[i] = Some((words, pid, site.clone()));
        site
    }
}

fn rust_site(pid: i32, file: u64, len: u32, line: u32) -> Option<CallSite> {
    let mut name = vec![0u8; len.min(4096) as usize];
    crate::procmem::read_from(pid, file, &mut name).ok()?;
    let object = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    Some(CallSite {
        object,
        offset: 0,
        function: None,
        file: Some(String::from_utf8_lossy(&name).into_owned()),
        line: Some(line),
    })
}

/// The executable mappings of `pid` that are backed by a file.
fn read_maps(pid: i32) -> Option<Vec<Mapping>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(text.lines().filter_map(parse_map_line).collect())
}

fn parse_map_line(line: &str) -> Option<Mapping> {
    let mut it = line.split_ascii_whitespace();
    let range = it.next()?;
    let perms = it.next()?;
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    let path: Vec<&str> = it.collect();
    let path = path.join(" ");
    if !perms.contains('x') || !path.starts_with('/') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        offset,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_lines_keep_executable_file_mappings_only() {
        let m = parse_map_line(
            "55d0c0a00000-55d0c0a01000 r-xp 00001000 08:01 1234   /tmp/a b/deadlock",
        )
        .expect("parsed");
        assert_eq!(
            (m.start, m.end, m.offset),
            (0x55d0c0a00000, 0x55d0c0a01000, 0x1000)
        );
        assert_eq!(m.path, "/tmp/a b/deadlock");
        assert!(parse_map_line("7ffd-7ffe rw-p 00000000 00:00 0 [stack]").is_none());
        assert!(parse_map_line("7ffd-7ffe r-xp 00000000 00:00 0 [vdso]").is_none());
    }

    #[inline(never)]
    fn here() -> u64 {
        let marker = 0u8;
        let _s = crate::callsite::enter_c(std::hint::black_box(&marker) as *const u8 as usize);
        crate::callsite::current().addr
    }

    #[test]
    fn this_test_resolves_its_own_call_to_file_line_and_function() {
        let addr = here();
        let line = line!() - 1;
        let mut s = Symbolizer::default();
        let site = s
            .resolve(std::process::id() as i32, SiteWords::code(addr))
            .expect("resolved");
        assert!(
            site.file.as_deref().unwrap_or("").ends_with("symbolize.rs"),
            "{site:?}"
        );
        assert_eq!(site.line, Some(line), "{site:?}");
        assert!(
            site.function
                .as_deref()
                .unwrap_or("")
                .contains("this_test_resolves"),
            "{site:?}"
        );
        let words = SiteWords::rust(std::panic::Location::caller());
        let rust = s
            .resolve(std::process::id() as i32, words)
            .expect("rust site");
        assert!(rust.file.is_some() && rust.line.is_some(), "{rust:?}");
    }
}

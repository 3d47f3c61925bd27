//! The weak `MPI_*` aliases of the `PMPI_*` implementations.
//!
//! MPICH makes `MPI_Send` a weak alias of `PMPI_Send` with `#pragma weak`; GCC only allows
//! that in the translation unit that defines `PMPI_Send`, which here is Rust. So each
//! `MPI_name` is a weak symbol defined in `global_asm!`: a single tail jump to
//! `PMPI_name`, which leaves every argument register and the return value untouched. A
//! profiling library that defines `MPI_name` (strong) wins over it in a static link, and
//! in a shared link by ordinary symbol interposition. `build.rs` exports the aliases from
//! the shared library. The list is the call table's (`strobe_runtime::for_each_mpi_call!`); a test
//! below checks `mpi.h` against the table, and the integration tests check that every
//! function declared in `mpi.h` is exported under both names.

/// One weak alias per C entry point of the call table: its `measured` and `local` calls
/// (the primitives without a C ABI have no `PMPI_` function to jump to).
macro_rules! weak_aliases {
    (
        measured { $($m:ident = $slot:literal $mname:literal,)* }
        measured_without_c_abi { $($r:ident = $rslot:literal $rname:literal,)* }
        local { $($l:ident $lname:literal,)* }
    ) => {
        weak_aliases!(@each $($mname)* $($lname)*);
    };
    (@each $($name:literal)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            core::arch::global_asm!(concat!(
                ".pushsection .text.MPI_", $name, ",\"ax\",@progbits\n",
                ".weak MPI_", $name, "\n",
                ".type MPI_", $name, ",@function\n",
                ".p2align 4\n",
                "MPI_", $name, ":\n",
                "    jmp PMPI_", $name, "@PLT\n",
                ".size MPI_", $name, ", .-MPI_", $name, "\n",
                ".popsection\n",
            ));
            #[cfg(target_arch = "aarch64")]
            core::arch::global_asm!(concat!(
                ".pushsection .text.MPI_", $name, ",\"ax\",@progbits\n",
                ".weak MPI_", $name, "\n",
                ".type MPI_", $name, ",%function\n",
                ".p2align 2\n",
                "MPI_", $name, ":\n",
                "    b PMPI_", $name, "\n",
                ".size MPI_", $name, ", .-MPI_", $name, "\n",
                ".popsection\n",
            ));
        )*
    };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("strobe-mpi: the MPI_* weak aliases are written for x86_64 and aarch64 only");

strobe_runtime::for_each_mpi_call!(weak_aliases);

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use strobe_runtime::calls::Call;

    /// `mpi.h` without its comments.
    fn header() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/mpi.h");
        let text = std::fs::read_to_string(path).expect("include/mpi.h");
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(i) = rest.find("/*") {
            out.push_str(&rest[..i]);
            let end = rest[i..].find("*/").map_or(rest.len(), |j| i + j + 2);
            rest = &rest[end..];
        }
        out.push_str(rest);
        out.lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Identifiers `prefix` + `name` followed by `(` in `text`: function-like names.
    fn called_names(text: &str, prefix: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().next_back();
            let tail = &rest[i + prefix.len()..];
            let len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            let starts_word = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if starts_word && len > 0 && tail[len..].trim_start().starts_with('(') {
                out.insert(tail[..len].to_string());
            }
            rest = &tail[len..];
        }
        out
    }

    /// Every C entry point of the table is declared in `mpi.h` (as `MPI_` and `PMPI_`),
    /// and every function `mpi.h` declares is in the table.
    #[test]
    fn mpi_h_declares_exactly_the_table() {
        let h = header();
        let table: BTreeSet<String> = Call::ALL.iter().map(|c| c.c_name().to_string()).collect();
        // The declaring macro must declare both names.
        let def = h
            .lines()
            .find(|l| l.starts_with("#define STROBE_MPI_FN("))
            .expect("STROBE_MPI_FN definition");
        assert!(def.contains("ret MPI_##name args;"), "{def}");
        assert!(def.contains("ret PMPI_##name args;"), "{def}");
        let declared: BTreeSet<String> = h
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("STROBE_MPI_FN("))
            .filter_map(|l| l.split(',').nth(1))
            .map(|n| n.trim().to_string())
            .collect();
        let missing: Vec<_> = table.difference(&declared).collect();
        let unknown: Vec<_> = declared.difference(&table).collect();
        assert!(
            missing.is_empty(),
            "in the table, not declared in mpi.h: {missing:?}"
        );
        assert!(
            unknown.is_empty(),
            "declared in mpi.h, not in the table: {unknown:?}"
        );
        // No prototype outside the macro: any other `MPI_x(` / `PMPI_x(` must be a macro
        // (`#define MPI_...(`) or a table entry.
        let outside: String = h
            .lines()
            .filter(|l| !l.trim_start().starts_with("STROBE_MPI_FN(") && !l.starts_with("#define"))
            .collect::<Vec<_>>()
            .join("\n");
        for prefix in ["MPI_", "PMPI_"] {
            let stray: Vec<_> = called_names(&outside, prefix)
                .into_iter()
                .filter(|n| !table.contains(n))
                .collect();
            assert!(
                stray.is_empty(),
                "{prefix} functions declared outside the table: {stray:?}"
            );
        }
    }

    #[test]
    fn the_name_scanner_finds_prototypes() {
        let names = called_names(
            "int MPI_Foo_bar (int); int PMPI_Baz(void); MPI_Comm x;",
            "MPI_",
        );
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["Foo_bar"]);
    }
}

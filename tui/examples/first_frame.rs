//! Open a recording and draw the terminal UI's first frame off-screen (160x48), as
//! `strobe tui FILE` does before it reads a key, and print how long each step took: a
//! profiling aid for the scale section of `strobe bench` (`perf record` this example).
//!
//! `cargo run --release -p strobe-tui --example first_frame -- FILE [REPEATS]`

use std::time::Instant;

use strobe_tui::ratatui::{backend::TestBackend, Terminal};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: first_frame FILE [REPEATS]")?;
    let repeats: usize = args.next().map_or(Ok(1), |s| s.parse())?;
    for _ in 0..repeats {
        let t = Instant::now();
        let rec = strobe_tui::data::open(std::path::Path::new(&path))?;
        let opened = t.elapsed();
        let mut app = strobe_tui::App::new(rec, strobe_tui::Theme { color: true });
        let made = t.elapsed();
        let mut term = Terminal::new(TestBackend::new(160, 48))?;
        strobe_tui::terminal::draw(&mut term, &mut app)?;
        let drawn = t.elapsed();
        println!(
            "open {:.1} ms, app {:.1} ms, first frame {:.1} ms",
            opened.as_secs_f64() * 1e3,
            (made - opened).as_secs_f64() * 1e3,
            drawn.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

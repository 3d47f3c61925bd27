//! Where does a slice's time go? Runs a job and prints the mean time of each internal
//! routine (the papers' LTR_i) over the slices that did something.
//! `cargo run --release --example slice_profile -- RANKS PROGRAM [ARGS...]`
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strobe_runtime::engine::{
    EngineConfig, LocalMetrics, SliceRecord, SliceSink, StrobePolicy, DEFAULT_DIRECT_COPY_MIN,
};
use strobe_runtime::launcher::{launch, LaunchConfig};
use strobe_runtime::sched::DEFAULT_CHUNK_BUDGET;

#[derive(Default)]
struct Profile {
    busy: Mutex<Vec<bool>>,
    node0: Mutex<Vec<LocalMetrics>>,
    getts: Mutex<Vec<Duration>>,
}

impl SliceSink for Profile {
    fn slice(&self, rec: &SliceRecord) {
        self.busy.lock().unwrap().push(!rec.decisions.is_empty());
        self.getts.lock().unwrap().push(rec.global.getts);
    }
    fn node_metrics(&self, _slice: u64, m: &LocalMetrics) {
        if m.node == 0 {
            self.node0.lock().unwrap().push(*m);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ranks: u32 = args[0].parse().expect("ranks");
    let p = Arc::new(Profile::default());
    let cfg = LaunchConfig {
        engine: EngineConfig {
            ranks,
            nodes: 1,
            slice: Duration::from_micros(500),
            policy: StrobePolicy::Adaptive,
            deadlock_slices: 20,
            chunk_budget: DEFAULT_CHUNK_BUDGET,
            direct_copy_min: DEFAULT_DIRECT_COPY_MIN,
            eager_max: strobe_runtime::engine::DEFAULT_EAGER_MAX,
            inline_max: strobe_runtime::engine::DEFAULT_INLINE_MAX,
            local_null: true,
            placement: None,
        },
        program: args[1].clone().into(),
        args: args[2..].iter().map(Into::into).collect(),
        tag_output: false,
        timeout: None,
        env: Vec::new(),
        mmds_resolution: 0,
        output: None,
        output_marks: None,
    };
    launch(&cfg, p.clone(), None).expect("launch");
    let busy = p.busy.lock().unwrap();
    let m = p.node0.lock().unwrap();
    let getts = p.getts.lock().unwrap();
    let sel: Vec<(&LocalMetrics, Duration)> = m
        .iter()
        .zip(busy.iter())
        .zip(getts.iter())
        .filter(|((_, b), _)| **b)
        .map(|((m, _), g)| (m, *g))
        .collect();
    let n = sel.len().max(1) as f64;
    let avg = |f: &dyn Fn(&LocalMetrics) -> Duration| {
        sel.iter().map(|(m, _)| f(m).as_secs_f64()).sum::<f64>() / n * 1e6
    };
    println!("busy slices: {}", sel.len());
    println!(
        "GETTS    {:8.2} us",
        sel.iter().map(|(_, g)| g.as_secs_f64()).sum::<f64>() / n * 1e6
    );
    println!("LTTS     {:8.2} us", avg(&|m| m.ltts));
    println!("LTDEM    {:8.2} us", avg(&|m| m.ltdem));
    println!("LTMSM    {:8.2} us", avg(&|m| m.ltmsm));
    println!(" drain   {:8.2} us", avg(&|m| m.t_drain));
    println!(" sched   {:8.2} us", avg(&|m| m.t_schedule));
    println!(" p2p     {:8.2} us", avg(&|m| m.t_p2p));
    println!(" bbm     {:8.2} us", avg(&|m| m.t_bbm));
    println!(" rm      {:8.2} us", avg(&|m| m.t_rm));
    println!(" deliver {:8.2} us", avg(&|m| m.t_deliver));
}

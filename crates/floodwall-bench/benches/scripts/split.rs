//! The per-function split of the batch rows (`batch.rs`): where in `redis-server` a row's
//! instructions go, per check, as `callgrind_annotate` splits a callgrind dump (self cost:
//! a function's own instructions, not its callees'). Debian's `redis-server` is stripped of
//! its static functions (Lua's VM among them: `luaV_execute`, `luaS_newlstr`, `luaH_*`),
//! which show as addresses; the exported ones (`setCommand`, `lookupKey`, `lua_*`,
//! `addReply*`, ...) by name.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Instructions per check in each function, side by side for the rows `split` names: the
/// functions among any row's top 16, in the first row's order.
pub(crate) fn print_split(split: &[(&str, &HashMap<String, f64>)]) {
    let Some((_, first)) = split.first() else {
        return;
    };
    let mut names: Vec<&String> = Vec::new();
    for (_, s) in split {
        let mut top: Vec<(&String, &f64)> = s.iter().collect();
        top.sort_by(|a, b| b.1.total_cmp(a.1));
        for (name, _) in top.into_iter().take(16) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.sort_by(|a, b| {
        let at = |n: &String| first.get(n).copied().unwrap_or(0.0);
        at(b).total_cmp(&at(a))
    });
    println!("\ninstructions per check by function (self cost)");
    let widths: Vec<usize> = split.iter().map(|(name, _)| name.len().max(9)).collect();
    print!("{:<36}", "function");
    for (name, _) in split {
        print!("  {name}");
    }
    println!();
    let line = |label: &str, value: &dyn Fn(&HashMap<String, f64>) -> f64| {
        print!("{:<36}", label.chars().take(36).collect::<String>());
        for ((_, s), width) in split.iter().zip(&widths) {
            print!("  {:>width$.0}", value(s));
        }
        println!();
    };
    for name in names {
        line(name, &|s| s.get(name).copied().unwrap_or(0.0));
    }
    line("(all)", &|s| s.values().sum());
}

/// A dump's instructions per check (of `checks`) by function (`callgrind_annotate
/// --inclusive=no`).
pub(crate) fn split(dump: &Path, checks: usize) -> HashMap<String, f64> {
    let out = Command::new("callgrind_annotate")
        .arg("--inclusive=no")
        .arg("--threshold=100")
        .arg(dump)
        .output()
        .expect("spawn callgrind_annotate");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut by = HashMap::new();
    // `1,234,567 (12.34%)  file:function [object]`
    for line in text.lines() {
        let line = line.trim_start();
        let Some((count, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(count) = count.replace(',', "").parse::<f64>() else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = rest
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .map_or(rest, |(_, r)| r);
        let place = rest.trim().split(" [").next().unwrap_or("");
        if place.is_empty() || place.starts_with("PROGRAM TOTALS") {
            continue;
        }
        let name = place.rsplit_once(':').map_or(place, |(_, f)| f);
        *by.entry(name.to_owned()).or_insert(0.0) += count;
    }
    // The frames below the event loop (`main`, `(below main)`, the loader) are listed with
    // their callees' cost, as they were on the stack when the counters were zeroed.
    let total = by.values().copied().fold(0.0, f64::max);
    by.into_iter()
        .filter(|(_, c)| *c < total / 2.0)
        .map(|(name, c)| (name, c / checks as f64))
        .collect()
}

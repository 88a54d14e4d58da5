//! The text of the script deciding one key under several policies at once (see
//! `crate::all`): `lua/all.lua` with each policy's sections in a function of its own, and
//! `lua/all_penalty.lua`'s where some of them have a penalty.

use super::{PENALTY_PARAMS, PRELUDE, PenaltyParams, Sections, at_now, fill, penalty_sections};
use crate::kind::{Layout, Lua};

const ALL: &str = include_str!("../lua/all.lua");
const ALL_PENALTY: &str = include_str!("../lua/all_penalty.lua");

/// The script deciding one key under each of `layouts` at once, all or nothing: the
/// prelude, then `lua/all.lua` with each policy's sections in a function of its own; `None`
/// when one is a whole script. `ARGV`: the cost, the numbers unless `written` in (each
/// policy's [`Layout::params`], then its penalty's [`PENALTY_PARAMS`]), then the time.
/// A penalized policy's ban and strike are functions too, on its three keys, which follow
/// the rate keys; without any penalty the text is as it was before penalties existed.
pub(crate) fn all(
    layouts: &[Layout],
    penalties: &[Option<PenaltyParams>],
    written: bool,
) -> Option<String> {
    let mut policies = String::new();
    let mut next_key = layouts.len() + 1;
    // After the cost; where the time is once the numbers read (if any) are counted.
    let mut next_arg = 2;
    for (i, layout) in layouts.iter().enumerate() {
        let Lua::Stepped(algorithm) = layout.kind.spec().lua else {
            return None;
        };
        let s = Sections::of(algorithm);
        let i = i + 1;
        let function = format!(
            "decide[{i}] = function(c)\n{params}local key, stored = KEYS[{i}], values[{i}]\n\
             {load}local allowed, remaining, retry, reset\n{step}\
             return allowed, function()\n{save}end, function()\n{reply}end\nend\n",
            params = s.params,
            load = s.load,
            step = s.step,
            save = s.save,
            reply = s.reply,
        );
        policies.push_str(&fill(
            &function,
            'p',
            written.then_some(&layout.args),
            next_arg,
        ));
        if !written {
            next_arg += layout.kind.spec().params;
        }
        if let Some(Some(numbers)) = penalties.get(i - 1) {
            let (ban, strike) = penalty_sections();
            let functions = format!(
                "banned[{i}] = function()\n{ban}end\n\
                 strike[{i}] = function(allowed)\n{strike}end\n"
            );
            // KEYS[2..4] of a single check are this policy's three keys here.
            let functions = (2..5).fold(functions, |text, k| {
                text.replace(
                    &format!("KEYS[{k}]"),
                    &format!("ALL_KEYS[\u{1}{}]", next_key + k - 2),
                )
            });
            let functions = functions.replace('\u{1}', "");
            policies.push_str(&fill(&functions, 'q', written.then_some(numbers), next_arg));
            if !written {
                next_arg += PENALTY_PARAMS;
            }
            next_key += 3;
        }
    }
    let penalized = next_key > layouts.len() + 1;
    let mut body = ALL.replace("-- {policies}\n", &policies);
    for (marker, section) in all_penalty_sections() {
        let section = if penalized { section } else { "" };
        body = body.replace(marker, section);
    }
    let body = body.replace("{m}", &layouts.len().to_string());
    Some(format!("{}{body}", at_now(PRELUDE, next_arg)))
}

/// `lua/all_penalty.lua`'s sections, by the marker of `lua/all.lua` each goes to.
fn all_penalty_sections() -> [(&'static str, &'static str); 4] {
    const CUT: &str = "lua/all_penalty.lua has its four `-- @` lines (unit-tested)";
    let (_, rest) = ALL_PENALTY.split_once("-- @penalty keys\n").expect(CUT);
    let (keys, rest) = rest.split_once("-- @bans\n").expect(CUT);
    let (bans, rest) = rest.split_once("-- @strikes\n").expect(CUT);
    let (strikes, struck) = rest.split_once("-- @struck\n").expect(CUT);
    [
        ("-- {penalty keys}\n", keys),
        ("-- {bans}\n", bans),
        ("-- {strikes}\n", strikes),
        ("-- {struck}\n", struck),
    ]
}

#[cfg(test)]
mod tests {
    use floodwall_core::Policy;

    use super::*;

    fn layout(policy: Result<Policy, floodwall_core::ConfigError>) -> Layout {
        Layout::of(policy.unwrap().parameters()).unwrap()
    }

    fn rate(q: &str) -> floodwall_core::Quota {
        q.parse().unwrap()
    }

    #[test]
    fn several_policies_with_penalties_read_their_own_keys_after_the_rate_keys() {
        let gcra = layout(Policy::gcra("a", rate("10/s")));
        let fw = layout(Policy::fixed_window("b", rate("7/min")));
        let numbers = [3, 1, 2, 1, 2, 9];
        let plain = all(&[gcra, fw, gcra], &[None, None, None], true).unwrap();
        assert!(!plain.contains("pen_") && !plain.contains("ALL_KEYS"));
        // The first and third penalized: keys 4..6, then 7..9.
        let penalties = [Some(numbers), None, Some(numbers)];
        let text = all(&[gcra, fw, gcra], &penalties, true).unwrap();
        for marker in ["{now}", "{p1}", "{q1}", "{m}", "-- {", "-- @", "\u{1}"] {
            assert!(!text.contains(marker), "{marker}");
        }
        assert!(text.contains("local KEYS = {unpack(ALL_KEYS, 1, 3)}"));
        for (i, first) in [(1, 4), (3, 7)] {
            let (_, strike) = text.split_once(&format!("strike[{i}] = function")).unwrap();
            let strike = strike.split_once("\nend\n").unwrap().0;
            for k in first..first + 3 {
                assert!(strike.contains(&format!("ALL_KEYS[{k}]")), "{i}: {k}");
            }
        }
        assert!(!text.contains("banned[2] ="));
        assert!((2..5).all(|k| !text.contains(&format!("', KEYS[{k}]"))));
    }

    #[test]
    fn a_script_of_several_policies_has_a_function_each_and_no_placeholder_left() {
        let gcra = layout(Policy::gcra("a", rate("10/s")));
        let fw = layout(Policy::fixed_window("b", rate("7/min")));
        let text = all(&[gcra, fw], &[None, None], true).unwrap();
        assert!(text.starts_with("-- floodwall: prepended"));
        assert!((1..3).all(|i| text.contains(&format!("decide[{i}] = function(c)"))));
        for marker in "{now}|{p1}|{p2}|{p3}|-- {|-- @load|-- @step|-- @save".split('|') {
            assert!(!text.contains(marker), "{marker}");
        }
        // Each policy's parameters are written into its own function.
        let fw_written = text.contains("local limit, period = 7,");
        assert!(text.contains(&gcra.args[0].to_string()) && fw_written);
        // A sliding log has no sections to paste.
        let log = layout(Policy::sliding_log("c", rate("5/s")));
        assert!(all(&[gcra, log], &[None, None], true).is_none());
    }

    #[test]
    fn a_script_of_several_policies_past_the_bound_reads_each_ones_numbers_in_turn() {
        let tb = layout(Policy::token_bucket("a", rate("10/s")));
        let fw = layout(Policy::fixed_window("b", rate("7/min")));
        let numbers = [3, 1, 2, 1, 2, 9];
        let text = all(&[tb, fw, tb], &[None, Some(numbers), None], false).unwrap();
        for marker in "{now}|{p1}|{p2}|{p3}|{q1}|{q6}|{m}|-- {|-- @".split('|') {
            assert!(!text.contains(marker), "{marker}");
        }
        // No number written in: not the fixed window's limit, nor the penalty's.
        assert!(!text.contains("local limit, period = 7,") && !text.contains("= 3, 1, 2"));
        // The token bucket's three from ARGV[2], the window's two, its penalty's six, the
        // second token bucket's three, then the time at ARGV[16].
        assert!(text.contains("local now, slack = ARGV[16], 0") && !text.contains("ARGV[17]"));
        let function = |i: usize| {
            let (_, f) = text.split_once(&format!("decide[{i}] = function")).unwrap();
            f.split_once("\nend\n").unwrap().0.to_owned()
        };
        let reads = |from: usize, to: usize| (from..=to).map(|k| format!("tonumber(ARGV[{k}])"));
        for (i, (from, to)) in [(1, (2, 4)), (2, (5, 6)), (3, (13, 15))] {
            for read in reads(from, to) {
                assert!(function(i).contains(&read), "{i}: {read}");
            }
        }
        let strike = text.split_once("strike[2] = function").unwrap().1;
        for read in reads(7, 12) {
            assert!(strike.contains(&read), "{read}");
        }
        // The written-in text of the same policies differs, and reads nothing past the time,
        // which follows the cost.
        let written = all(&[tb, fw, tb], &[None, Some(numbers), None], true).unwrap();
        assert!(written.contains("local now, slack = ARGV[2], 0") && !written.contains("ARGV[3]"));
        assert_ne!(written, text);
    }
}

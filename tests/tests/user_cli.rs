//! The user command line (`scripts/client/ergon.mjs`) against a live dev node, every command: its
//! help, the mistakes a person makes on a command line (exit status 2, a readable message, never a
//! stack trace), refusals tried before anything is signed (exit status 1, nothing paid or held,
//! the limit's value named), and each command doing its work (`--yes --json`).

use std::time::Duration;

use ergon_integration_tests::{dev_pair, user_cli, user_cli_json, user_cli_status, Node, Ports};
use ergon_protocol::units::ERG;
use serde_json::Value;

/// A Node.js stack trace line ("    at main (file:///…)").
fn has_stack_trace(out: &str) -> bool {
    out.lines().any(|l| l.trim_start().starts_with("at ") && l.contains(".mjs:"))
}

#[test]
fn the_user_command_line_does_every_command_and_refuses_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = ["--dev", "--tmp"].iter().map(|s| s.to_string()).collect();
    let node = Node::start("dev", Ports::free(), &args, dir.path());
    node.wait_finalized(1, Duration::from_secs(180));
    let rpc = node.ports.rpc;
    let spec = ergon_integration_tests::repo_dir().join("worker/examples/fashion-mnist-mlp.json");
    let spec = spec.to_string_lossy().to_string();
    let commands = [
        "check-spec",
        "post-job",
        "list-jobs",
        "watch-job",
        "fetch-model",
        "cancel-job",
        "account",
        "bond",
        "unbond",
        "rebond",
        "withdraw",
    ];

    // Help: the tool's lists every command; each command has its own.
    let (code, out) = user_cli_status(rpc, &["--help"]);
    assert_eq!(code, Some(0), "{out}");
    for c in commands {
        assert!(out.contains(&format!("  {c} ")), "--help lists {c}: {out}");
        let (code, help) = user_cli_status(rpc, &[c, "--help"]);
        assert!(code == Some(0) && help.contains(&format!("usage: node ergon.mjs {c}")), "{help}");
    }

    // Mistakes on the command line: exit status 2, what is wrong, where the help is; no stack trace.
    for (args, says) in [
        (&[][..], "no command given"),
        (&["bnd"][..], "no command 'bnd'"),
        (&["bond", "-5"][..], "Unknown option '-5'"),
        (&["bond", "abc"][..], "abc is not an amount of ERG"),
        (&["bond", "0"][..], "more than 0 ERG"),
        (&["bond"][..], "bond needs AMOUNT"),
        (&["fetch-model"][..], "fetch-model needs ID"),
        (&["watch-job", "x"][..], "a job id must be a whole number"),
        (&["post-job", &spec][..], "post-job needs --budget ERG"),
        (
            &["post-job", &spec, "--budget", "10", "--deadline", "soon"][..],
            "--deadline (blocks from now)",
        ),
        (&["bond", "5", "--key", "Alice"][..], "'Alice' is not a key"),
        (&["account", "5xyz"][..], "5xyz is not an account address"),
        (&["list-jobs", "--frobnicate"][..], "Unknown option '--frobnicate'"),
        (&["withdraw", "now"][..], "withdraw takes no arguments"),
    ] {
        let (code, out) = user_cli_status(rpc, args);
        assert_eq!(code, Some(2), "ergon.mjs {args:?}: {out}");
        assert!(out.contains(says) && out.contains("--help"), "ergon.mjs {args:?}: {out}");
        assert!(!has_stack_trace(&out), "ergon.mjs {args:?} printed a stack trace: {out}");
    }

    // Ferdie bonds 2 000 ERG (the plan, in ERG, is printed before it is sent).
    let ferdie = dev_pair("//Ferdie").public_key().0;
    let ferdie_address = dev_pair("//Ferdie").public_key().to_account_id().to_string();
    let (ok, out) = user_cli(rpc, &["bond", "2000", "--key", "//Ferdie", "--yes"]);
    assert!(
        ok && out.contains("active bond 0 ERG → 2000 ERG") && out.contains("fee about"),
        "{out}"
    );
    assert_eq!(node.bond(&ferdie).map(|b| b.active), Some(2_000 * ERG));

    // Refusals found before anything is signed: exit status 1, the rule with its limit, no fee.
    let before = node.account(&ferdie);
    for (args, says) in [
        (&["unbond", "5000"][..], "trainerStaking.InsufficientBond"),
        (&["unbond", "1500"][..], "(MinBond = 1000 ERG)"),
        (&["rebond", "10"][..], "trainerStaking.NothingToRebond"),
        (&["withdraw"][..], "trainerStaking.NothingToWithdraw"),
        (&["post-job", &spec, "--budget", "0.5"][..], "(MinBudget = 1 ERG)"),
        (&["post-job", &spec, "--budget", "0.5"][..], "the least budget this spec takes is 1 ERG"),
        (&["post-job", &spec, "--budget", "100", "--bid-window", "100000"][..], "MaxBidWindow = "),
    ] {
        let args = [args, &["--key", "//Ferdie", "--yes"]].concat();
        let (code, out) = user_cli_status(rpc, &args);
        assert_eq!(code, Some(1), "ergon.mjs {args:?}: {out}");
        assert!(
            out.contains(says) && out.contains("would be refused"),
            "ergon.mjs {args:?}: {out}"
        );
        assert!(!has_stack_trace(&out), "{out}");
    }
    // Without --yes and without a terminal there is nobody to ask: nothing is sent.
    let (code, out) = user_cli_status(rpc, &["unbond", "1000", "--key", "//Ferdie"]);
    assert!(code == Some(2) && out.contains("no terminal to confirm on; add --yes"), "{out}");
    let after = node.account(&ferdie);
    assert_eq!((after.nonce, after.free), (before.nonce, before.free), "nothing signed, no fee");

    // A spec beyond the chain's length bounds is refused with each limit named (it would not even
    // decode on chain).
    let mut big: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    big["train"]["files"][0] = Value::String(format!("https://example.com/{}", "a".repeat(300)));
    let big_path = dir.path().join("big.json");
    std::fs::write(&big_path, big.to_string()).unwrap();
    let (code, out) = user_cli_status(rpc, &["check-spec", &big_path.to_string_lossy()]);
    assert!(code == Some(1) && out.contains("at most 256 (jobMarket.maxUriLength)"), "{out}");

    // Unbond, see the unlock, rebond.
    let unbonded = user_cli_json(rpc, &["unbond", "1000", "--key", "//Ferdie"]);
    assert_eq!(unbonded["active"], "1000000000000000", "{unbonded}");
    let account = user_cli_json(rpc, &["account", "--key", "//Ferdie"]);
    let chunks = account["bond"]["unlocking"].as_array().cloned().unwrap_or_default();
    assert_eq!(chunks.len(), 1, "{account}");
    assert_eq!(chunks[0]["value"], "1000000000000000", "{account}");
    assert!(chunks[0]["unlocksAt"].as_u64().unwrap_or_default() > 1_000, "{account}");
    let (ok, out) = user_cli(rpc, &["account", &ferdie_address]);
    assert!(ok && out.contains("unbonding 1000 ERG: withdrawable from block #"), "{out}");
    user_cli_json(rpc, &["rebond", "1000", "--key", "//Ferdie"]);
    assert_eq!(node.bond(&ferdie).map(|b| (b.active, b.unlocking)), Some((2_000 * ERG, 0)));

    // A job: checked, posted, listed, cancelled by its owner only, watched to its end.
    let (ok, out) = user_cli(rpc, &["check-spec", &spec]);
    assert!(ok && out.contains("ut of work") && out.contains("least budget: "), "{out}");
    // The least budget the chain names is exactly the one it takes: a planck less is refused.
    let checked = user_cli_json(rpc, &["check-spec", &spec]);
    let least: u128 =
        checked["leastBudget"].as_str().and_then(|s| s.parse().ok()).expect("leastBudget");
    // Both price tiers: the least budget is the GPU's (the cheaper); a CPU trainer needs at least
    // as much (here both are `MinBudget`: the example's work is small on the fast runtime).
    let tier =
        |class: &str| -> Option<u128> { checked["leastBudgets"][class].as_str()?.parse().ok() };
    assert_eq!(tier("gpu"), Some(least), "{checked}");
    assert!(tier("cpu").is_some_and(|cpu| cpu >= least), "{checked}");
    let as_erg = |planck: u128| format!("{}.{:012}", planck / ERG, planck % ERG);
    let (code, out) = user_cli_status(
        rpc,
        &["post-job", &spec, "--budget", &as_erg(least - 1), "--key", "//Ferdie", "--yes"],
    );
    assert!(code == Some(1) && out.contains("would be refused"), "{out}");
    let at_least =
        user_cli_json(rpc, &["post-job", &spec, "--budget", &as_erg(least), "--key", "//Ferdie"]);
    let least_job = at_least["jobs"][0].as_u64().expect("the least budget is taken").to_string();
    user_cli_json(rpc, &["cancel-job", &least_job, "--key", "//Ferdie"]);
    let posted = user_cli_json(rpc, &["post-job", &spec, "--budget", "100", "--bid-window", "300"]);
    let job_id = posted["jobs"][0].as_u64().expect("a job id");
    let job = job_id.to_string();
    let listed = user_cli_json(rpc, &["list-jobs"]);
    assert!(
        listed["open"].as_array().is_some_and(|o| o.iter().any(|j| j.as_u64() == Some(job_id))),
        "{listed}"
    );
    assert!(
        listed["mine"].as_array().is_some_and(|o| o.iter().any(|j| j.as_u64() == Some(job_id))),
        "{listed}"
    );
    let (code, out) = user_cli_status(rpc, &["cancel-job", &job, "--key", "//Ferdie", "--yes"]);
    assert!(code == Some(1) && out.contains("jobMarket.NotOwner"), "{out}");
    let cancelled = user_cli_json(rpc, &["cancel-job", &job]);
    assert_eq!(cancelled["cancelled"], true, "{cancelled}");
    // A job that ended (here: failed, cancelled) ends the watch with exit status 0 and the outcome.
    let watched = user_cli_json(rpc, &["watch-job", &job]);
    assert_eq!((&watched["outcome"], &watched["reason"]), (&"failed".into(), &"Cancelled".into()));
    let (code, out) = user_cli_status(rpc, &["fetch-model", &job]);
    assert!(code == Some(1) && out.contains("not completed"), "{out}");
    let (code, out) = user_cli_status(rpc, &["watch-job", "999999"]);
    assert!(code == Some(1) && out.contains("no job 999999"), "{out}");
}

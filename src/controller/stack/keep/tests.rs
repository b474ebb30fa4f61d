//! Table tests of the keep plan: which releases a ClusterStack keeps, and why.

use super::*;
use crate::api::ClusterStackSpec;

fn stack(channel: Channel, versions: &[&str], auto_subscribe: bool) -> ClusterStack {
    let mut cs = ClusterStack::new(
        "ferrol",
        ClusterStackSpec {
            provider: "docker".into(),
            name: "ferrol".into(),
            kubernetes_version: "1.27".into(),
            channel,
            versions: versions.iter().map(|s| s.to_string()).collect(),
            auto_subscribe,
            no_provider: false,
            provider_ref: None,
            source: None,
            poll_interval: None,
            suspend: false,
            verify: None,
        },
    );
    cs.metadata.namespace = Some("stacks".into());
    cs
}

fn ids(tags: &[&str]) -> Vec<ReleaseId> {
    tags.iter().map(|t| ReleaseId::from_tag(t).unwrap()).collect()
}

fn existing(items: &[(&str, bool)]) -> Vec<ExistingRelease> {
    items.iter().map(|(n, r)| ExistingRelease { name: n.to_string(), ready: *r }).collect()
}

fn usage(ns: &str, cluster: &str, class: &str, class_ns: &str) -> ClassUsage {
    ClassUsage {
        cluster: ClusterKey { namespace: ns.into(), name: cluster.into() },
        class: ReleaseId::parse_any(class).unwrap(),
        class_namespace: class_ns.into(),
    }
}

fn tags(ids: &[ReleaseId]) -> Vec<String> {
    ids.iter().map(ReleaseId::tag).collect()
}

fn kept(plan: &Plan) -> Vec<&str> {
    plan.keep.keys().map(String::as_str).collect()
}

#[test]
fn autosubscribe_keeps_and_creates_the_latest_numerically() {
    let listed = ids(&["docker-ferrol-1-27-v9", "docker-ferrol-1-27-v10", "docker-ferrol-1-27-v2"]);
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &[]);
    assert_eq!(p.latest.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v10"));
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v10"]);
    assert_eq!(p.keep["docker-ferrol-1-27-v10"].reasons, [KeepReason::Latest]);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v10"]);
    assert!(p.delete.is_empty());
    assert!(p.warnings.is_empty());
}

#[test]
fn without_autosubscribe_latest_is_reported_but_not_kept() {
    let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2"]);
    let p = plan(&stack(Channel::Stable, &["v1"], false), Some(&listed), &[], &[]);
    assert_eq!(p.latest.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v2"));
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v1"]);
    assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::Pinned]);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v1"]);
}

#[test]
fn other_stacks_minors_and_channels_never_match() {
    let listed = ids(&[
        "openstack-ferrol-1-27-v50",
        "docker-scs-1-27-v50",
        "docker-ferrol-1-28-v50",
        "docker-ferrol-1-27-v1-alpha-9",
        "docker-ferrol-1-27-v3",
    ]);
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &[]);
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v3"]);
}

#[test]
fn pinned_versions_are_kept_and_duplicates_merge_reasons() {
    let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
    let p = plan(&stack(Channel::Stable, &["v1", "v3", "v1"], true), Some(&listed), &[], &[]);
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
    assert_eq!(p.keep["docker-ferrol-1-27-v3"].reasons, [KeepReason::Pinned, KeepReason::Latest]);
    assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::Pinned]);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
}

#[test]
fn malformed_and_wrong_channel_entries_are_warnings_not_failures() {
    let listed = ids(&["docker-ferrol-1-27-v1"]);
    let p = plan(&stack(Channel::Stable, &["1", "v1-alpha-1", "v1-alpha.1", "v1"], true), Some(&listed), &[], &[]);
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v1"]);
    assert!(matches!(&p.warnings[0], PlanWarning::MalformedVersion { entry, .. } if entry == "1"));
    assert!(matches!(&p.warnings[1], PlanWarning::MalformedVersion { entry, .. } if entry == "v1-alpha-1"));
    assert!(matches!(&p.warnings[2], PlanWarning::PinnedWrongChannel { entry, .. } if entry == "v1-alpha.1"));
    assert_eq!(p.warnings.len(), 3);
    assert!(p.warnings[0].to_string().contains("\"1\""));
}

#[test]
fn pinned_version_not_listed_is_a_warning_and_not_created() {
    let listed = ids(&["docker-ferrol-1-27-v1"]);
    let p = plan(&stack(Channel::Stable, &["v7"], false), Some(&listed), &[], &[]);
    assert_eq!(p.warnings, [PlanWarning::PinnedNotListed { version: "v7".into() }]);
    assert!(p.create.is_empty());
    // Kept all the same: an existing v7 must not be deleted because a listing lost it.
    let p = plan(
        &stack(Channel::Stable, &["v7"], false),
        Some(&listed),
        &existing(&[("docker-ferrol-1-27-v7", true)]),
        &[],
    );
    assert!(p.delete.is_empty());
    assert!(p.keep.contains_key("docker-ferrol-1-27-v7"));
    // Neither listed nor existing: nothing to keep, so not counted as kept.
    let p = plan(&stack(Channel::Stable, &["v7"], false), Some(&listed), &[], &[]);
    assert!(p.keep.is_empty(), "{:?}", p.keep);
}

#[test]
fn pinned_versions_are_capped_and_the_status_stays_small() {
    // The reported case: 10,000 pins, one release published.
    let pins: Vec<String> = (1..=10_000).map(|n| format!("v{n}")).collect();
    let pins: Vec<&str> = pins.iter().map(String::as_str).collect();
    let listed = ids(&["docker-ferrol-1-27-v1"]);
    let p = plan(&stack(Channel::Stable, &pins, false), Some(&listed), &[], &[]);
    assert_eq!(p.warnings[0], PlanWarning::TooManyPinned { given: 10_000, cap: MAX_PINNED_VERSIONS });
    assert!(p.warnings[0].to_string().contains("only the first 100 are pinned"), "{}", p.warnings[0]);
    // One release exists to keep, and one warning per pin inside the cap at most.
    assert_eq!(p.keep.keys().collect::<Vec<_>>(), ["docker-ferrol-1-27-v1"]);
    assert_eq!(p.warnings.len(), 1 + (MAX_PINNED_VERSIONS - 1));
    let message: String = p.warnings.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    assert!(message.len() < 8 * 1024, "{} bytes", message.len());
    // The 101st pin is not kept even when published.
    let listed = ids(&["docker-ferrol-1-27-v101"]);
    let p = plan(&stack(Channel::Stable, &pins[..101], false), Some(&listed), &[], &[]);
    assert!(p.keep.is_empty() && p.create.is_empty(), "{:?}", p.keep);
    // A huge entry is quoted cut short.
    let long = format!("v1-{}", "x".repeat(100_000));
    let p = plan(&stack(Channel::Stable, &[&long], false), Some(&listed), &[], &[]);
    assert!(p.warnings[0].to_string().len() < 300, "{}", p.warnings[0]);
}

#[test]
fn existing_releases_outside_the_keep_set_are_deleted() {
    let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
    let ex = existing(&[
        ("docker-ferrol-1-27-v1", true),
        ("docker-ferrol-1-27-v2", false),
        ("docker-ferrol-1-27-v3", false),
    ]);
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
    // v3 is latest, v1 latest ready, v2 neither.
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
    assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::LatestReady]);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v2"]);
    assert!(p.create.is_empty());
}

#[test]
fn latest_ready_compares_numerically() {
    let listed = ids(&["docker-ferrol-1-27-v9", "docker-ferrol-1-27-v10", "docker-ferrol-1-27-v11"]);
    let ex = existing(&[
        ("docker-ferrol-1-27-v9", true),
        ("docker-ferrol-1-27-v10", true),
        ("docker-ferrol-1-27-v11", false),
    ]);
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
    assert_eq!(p.latest_ready.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v10"));
    assert_eq!(p.delete, ["docker-ferrol-1-27-v9"]);
}

#[test]
fn source_down_deletes_and_creates_nothing() {
    let ex = existing(&[("docker-ferrol-1-27-v1", false), ("docker-ferrol-1-27-v2", false)]);
    let p = plan(&stack(Channel::Stable, &["v5"], true), None, &ex, &[]);
    assert!(!p.source_listed);
    assert!(p.delete.is_empty());
    assert!(p.create.is_empty());
    assert_eq!(p.latest, None);
    // No "not listed" warning when nothing could be listed.
    assert!(p.warnings.is_empty());
}

#[test]
fn an_empty_listing_is_a_listing_and_deletes() {
    let ex = existing(&[("docker-ferrol-1-27-v1", false)]);
    let p = plan(&stack(Channel::Stable, &[], true), Some(&[]), &ex, &[]);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v1"]);
}

#[test]
fn a_release_in_use_is_never_deleted_even_when_unlisted() {
    let listed = ids(&["docker-ferrol-1-27-v5"]);
    let ex = existing(&[("docker-ferrol-1-27-v1", false), ("docker-ferrol-1-27-v5", false)]);
    let usages = [
        usage("team-a", "c1", "docker-ferrol-1-27-v1", "stacks"),
        usage("stacks", "c2", "docker-ferrol-1-27-v1", "stacks"),
    ];
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &usages);
    assert!(p.delete.is_empty());
    let clusters = vec![
        ClusterKey { namespace: "stacks".into(), name: "c2".into() },
        ClusterKey { namespace: "team-a".into(), name: "c1".into() },
    ];
    assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::InUse { clusters }]);
    // Unlisted, so not re-created if it were missing.
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &usages);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v5"]);
}

#[test]
fn usage_in_another_namespace_or_of_another_stack_does_not_keep() {
    let listed = ids(&["docker-ferrol-1-27-v5"]);
    let ex = existing(&[("docker-ferrol-1-27-v1", false), ("docker-ferrol-1-27-v5", false)]);
    let usages = [
        usage("team-a", "c1", "docker-ferrol-1-27-v1", "elsewhere"),
        usage("stacks", "c2", "docker-ferrol-1-28-v1", "stacks"),
    ];
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &usages);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v1"]);
}

#[test]
fn usage_by_dot_form_keeps_a_custom_release() {
    let listed = ids(&["docker-ferrol-1-27-v0-sha-abc", "docker-ferrol-1-27-v0-sha-def"]);
    let ex = existing(&[("docker-ferrol-1-27-v0-sha-abc", true), ("docker-ferrol-1-27-v0-sha-def", true)]);
    let usages = [usage("stacks", "c1", "docker-ferrol-1-27-v0-sha.abc", "stacks")];
    let p = plan(&stack(Channel::Custom, &[], true), Some(&listed), &ex, &usages);
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v0-sha-abc"]);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v0-sha-def"]);
}

#[test]
fn custom_channel_has_no_latest_and_keeps_pinned_only() {
    let listed = ids(&["docker-ferrol-1-27-v0-sha-abc", "docker-ferrol-1-27-v0-sha-def", "docker-ferrol-1-27-v4"]);
    let p = plan(&stack(Channel::Custom, &["v0-sha.def", "v4"], true), Some(&listed), &[], &[]);
    assert_eq!(p.latest, None);
    assert_eq!(p.latest_ready, None);
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v0-sha-def"]);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v0-sha-def"]);
    assert!(matches!(&p.warnings[..], [PlanWarning::PinnedWrongChannel { entry, .. }] if entry == "v4"));
}

#[test]
fn foreign_existing_releases_are_reported_and_left_alone() {
    let listed = ids(&["docker-ferrol-1-27-v1"]);
    let ex =
        existing(&[("my-hand-made-release", false), ("docker-ferrol-1-28-v1", false), ("docker-ferrol-1-27-v1", true)]);
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
    assert!(p.delete.is_empty());
    assert_eq!(
        p.warnings,
        [
            PlanWarning::ForeignRelease { name: "my-hand-made-release".into() },
            PlanWarning::ForeignRelease { name: "docker-ferrol-1-28-v1".into() },
        ]
    );
}

#[test]
fn existing_releases_are_not_created_again() {
    let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2"]);
    let ex = existing(&[("docker-ferrol-1-27-v2", false)]);
    let p = plan(&stack(Channel::Stable, &["v1"], true), Some(&listed), &ex, &[]);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v1"]);
}

#[test]
fn bad_kubernetes_version_matches_nothing_and_deletes_nothing_foreign() {
    let mut cs = stack(Channel::Stable, &["v1"], true);
    cs.spec.kubernetes_version = "1.x".into();
    let listed = ids(&["docker-ferrol-1-27-v1"]);
    let p = plan(&cs, Some(&listed), &existing(&[("docker-ferrol-1-27-v1", true)]), &[]);
    assert!(p.keep.is_empty() && p.create.is_empty() && p.delete.is_empty());
    assert!(matches!(p.warnings[0], PlanWarning::BadKubernetesVersion { .. }));
}

#[test]
fn version_order_is_numeric_then_non_stable() {
    let mut v = ids(&[
        "docker-ferrol-1-27-v0-sha-b",
        "docker-ferrol-1-27-v10",
        "docker-ferrol-1-27-v0-sha-a",
        "docker-ferrol-1-27-v9",
    ]);
    v.sort_by(version_order);
    assert_eq!(
        tags(&v),
        [
            "docker-ferrol-1-27-v9",
            "docker-ferrol-1-27-v10",
            "docker-ferrol-1-27-v0-sha-a",
            "docker-ferrol-1-27-v0-sha-b"
        ]
    );
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    // Versions v0..v11 of the stack (plus a few of another minor and two hashes),
    // so that listings, existing releases and usages overlap often.
    fn universe() -> Vec<ReleaseId> {
        let mut tags: Vec<String> = (0..12).map(|n| format!("docker-ferrol-1-27-v{n}")).collect();
        tags.extend(
            ["docker-ferrol-1-28-v3", "docker-ferrol-1-27-v0-sha-abc", "docker-ferrol-1-27-v0-sha-def"]
                .map(String::from),
        );
        tags.iter().map(|t| ReleaseId::from_tag(t).unwrap()).collect()
    }

    fn pick(mask: u32) -> Vec<ReleaseId> {
        universe().into_iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, id)| id).collect()
    }

    proptest! {
        #[test]
        fn plan_invariants(
            listed_mask in any::<u32>(),
            source_up in any::<bool>(),
            existing_mask in any::<u32>(),
            ready_mask in any::<u32>(),
            used_mask in any::<u32>(),
            pinned in proptest::collection::vec(0u32..14, 0..3),
            custom in any::<bool>(),
            auto in any::<bool>(),
        ) {
            let listed = pick(listed_mask);
            let existing: Vec<ExistingRelease> = pick(existing_mask)
                .iter()
                .enumerate()
                .map(|(i, id)| ExistingRelease { name: id.tag(), ready: ready_mask & (1 << i) != 0 })
                .collect();
            let usages: Vec<ClassUsage> = pick(used_mask)
                .iter()
                .map(|id| ClassUsage {
                    cluster: ClusterKey { namespace: "team".into(), name: id.tag() },
                    class: id.clone(),
                    class_namespace: "stacks".into(),
                })
                .collect();
            let versions: Vec<String> = pinned.iter().map(|n| format!("v{n}")).collect();
            let versions: Vec<&str> = versions.iter().map(String::as_str).collect();
            let channel = if custom { Channel::Custom } else { Channel::Stable };
            let cs = stack(channel, &versions, auto);
            let p = plan(&cs, source_up.then_some(listed.as_slice()), &existing, &usages);

            let used: BTreeSet<String> = usages.iter().filter(|u| u.class.kubernetes.minor == 27).map(|u| u.class.tag()).collect();
            let existing_names: BTreeSet<String> = existing.iter().map(|e| e.name.clone()).collect();
            let listed_tags: BTreeSet<String> = listed.iter().map(ReleaseId::tag).collect();
            if !source_up {
                prop_assert!(p.delete.is_empty() && p.create.is_empty());
            }
            for name in &p.delete {
                prop_assert!(!used.contains(name), "deletes {} in use", name);
                prop_assert!(existing_names.contains(name));
                prop_assert!(!p.keeps(name));
            }
            for id in &p.create {
                prop_assert!(listed_tags.contains(&id.tag()));
                prop_assert!(!existing_names.contains(&id.tag()));
                prop_assert!(p.keeps(&id.tag()));
            }
            for name in &used {
                prop_assert!(p.keeps(name), "{} in use but not kept", name);
            }
            // Everything existing is either kept, deleted, or (source down / other minor) left alone.
            for name in &existing_names {
                let left_alone = !source_up || name.contains("-1-28-");
                prop_assert!(p.keeps(name) || p.delete.contains(name) || left_alone);
            }
            if let Some(latest) = &p.latest {
                prop_assert!(!custom && source_up);
                for id in &listed {
                    if let (StackVersion::Stable(n), StackVersion::Stable(l)) = (&id.version, &latest.version) {
                        prop_assert!(id.kubernetes.minor != 27 || n <= l);
                    }
                }
            }
        }
    }
}

#[test]
fn the_way_back_of_an_unfinished_rollout_is_kept() {
    let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
    let ex =
        existing(&[("docker-ferrol-1-27-v1", true), ("docker-ferrol-1-27-v2", true), ("docker-ferrol-1-27-v3", true)]);
    let hold = |tag: &str| RolloutHold { rollout: "ferrol".into(), release: ReleaseId::from_tag(tag).unwrap() };
    // No Cluster uses v2 any more (all moved to v3), but the rollout may still move them back.
    let holds = [hold("docker-ferrol-1-27-v2"), hold("docker-ferrol-1-27-v2"), hold("docker-ferrol-1-28-v1")];
    let p = plan_with_holds(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[], &holds);
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v1"]);
    assert_eq!(p.keep["docker-ferrol-1-27-v2"].reasons, [KeepReason::RolloutFrom { rollouts: vec!["ferrol".into()] }]);
    assert_eq!(p.keep["docker-ferrol-1-27-v2"].reasons[0].to_string(), "the way back of ClusterStackRollout ferrol");
    // Without the hold v2 goes.
    let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2"]);
}

/// The stack repository's development builds, `v0-ttl.<unix time>`: neither the stable nor the
/// custom channel auto-subscribes to them; the `ttl` channel does, newest by time (numerically:
/// a time with more digits is later), and keeps the newest ready one.
#[test]
fn ttl_builds_are_taken_by_auto_subscribe_only_in_the_ttl_channel_newest_by_time() {
    let listed = ids(&[
        "docker-ferrol-1-27-v3",
        "docker-ferrol-1-27-v0-ttl-999999999",
        "docker-ferrol-1-27-v0-ttl-1712345678",
        "docker-ferrol-1-27-v0-ttl-1712000000",
        "docker-ferrol-1-27-v0-sha-abc1234",
    ]);
    let stable = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &[]);
    assert_eq!(kept(&stable), ["docker-ferrol-1-27-v3"]);
    let custom = plan(&stack(Channel::Custom, &[], true), Some(&listed), &[], &[]);
    assert!(custom.keep.is_empty() && custom.latest.is_none(), "{custom:?}");
    // Pinned, a ttl build is kept in the custom channel (the stack repository's own ClusterStack).
    let pinned = plan(&stack(Channel::Custom, &["v0-ttl.1712000000"], true), Some(&listed), &[], &[]);
    assert_eq!(kept(&pinned), ["docker-ferrol-1-27-v0-ttl-1712000000"]);

    let ttl = Channel::parse("ttl").unwrap();
    let existing =
        existing(&[("docker-ferrol-1-27-v0-ttl-1712000000", true), ("docker-ferrol-1-27-v0-ttl-999999999", true)]);
    let p = plan(&stack(ttl.clone(), &[], true), Some(&listed), &existing, &[]);
    assert_eq!(p.latest.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v0-ttl-1712345678"));
    assert_eq!(p.latest_ready.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v0-ttl-1712000000"));
    assert_eq!(kept(&p), ["docker-ferrol-1-27-v0-ttl-1712000000", "docker-ferrol-1-27-v0-ttl-1712345678"]);
    assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v0-ttl-1712345678"]);
    assert_eq!(p.delete, ["docker-ferrol-1-27-v0-ttl-999999999"]);
    // Without auto-subscribe the newest is reported, not kept.
    let p = plan(&stack(ttl, &[], false), Some(&listed), &[], &[]);
    assert!(p.keep.is_empty() && p.latest.is_some());
    // A stable pin in the ttl channel is the wrong channel; content hashes have no order.
    let sha = plan(&stack(Channel::parse("sha").unwrap(), &[], true), Some(&listed), &[], &[]);
    assert!(sha.latest.is_none() && sha.keep.is_empty());
}

#[test]
fn channel_names_parse_and_serialize_as_written() {
    for (text, channel) in
        [("stable", Channel::Stable), ("custom", Channel::Custom), ("ttl", Channel::Named("ttl".into()))]
    {
        assert_eq!(Channel::parse(text).unwrap(), channel);
        assert_eq!(serde_json::to_value(&channel).unwrap(), text);
        assert_eq!(serde_json::from_value::<Channel>(serde_json::json!(text)).unwrap(), channel);
    }
    for bad in ["", "TTL", "1ttl", "t-tl", "t.l"] {
        assert!(Channel::parse(bad).is_err(), "{bad}");
        assert!(serde_json::from_value::<Channel>(serde_json::json!(bad)).is_err(), "{bad}");
    }
}

/// Stack names with dashes (an open csctl change allows them): `scs`, `scs-hcp` and `scs-2` are
/// three stacks, never each other's releases, and a Cluster's class names its own.
#[test]
fn dashed_stack_names_are_stacks_of_their_own() {
    let listed =
        ids(&["docker-scs-1-27-v1", "docker-scs-hcp-1-27-v5", "docker-scs-2-1-27-v9", "docker-scs-hcp-2-1-27-v7"]);
    let named = |name: &str| {
        let mut s = stack(Channel::Stable, &[], true);
        s.spec.name = name.into();
        s
    };
    for (name, latest) in [
        ("scs", "docker-scs-1-27-v1"),
        ("scs-hcp", "docker-scs-hcp-1-27-v5"),
        ("scs-2", "docker-scs-2-1-27-v9"),
        ("scs-hcp-2", "docker-scs-hcp-2-1-27-v7"),
    ] {
        let p = plan(&named(name), Some(&listed), &[], &[]);
        assert_eq!(kept(&p), [latest], "{name}");
    }
    // In use by its class (dot form), in the stack's namespace; not by the other stack's.
    let used = [usage("team-a", "c1", "docker-scs-hcp-1-27-v0-ttl.1712345678", "stacks")];
    let p = plan(&named("scs-hcp"), Some(&listed), &[], &used);
    assert!(p.keeps("docker-scs-hcp-1-27-v0-ttl-1712345678"), "{p:?}");
    assert!(!plan(&named("scs"), Some(&listed), &[], &used).keeps("docker-scs-hcp-1-27-v0-ttl-1712345678"));
}

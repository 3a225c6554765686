//! A lab removes exactly what it added, even when namespaces that are not the lab's exist (a
//! container runtime's, another tool's): its shared blackhole routes go with the last lab, a
//! foreign namespace stays (issue "Safe under hostile input and faults", the fault suite).

use std::process::Command;

use fabric_testkit::lab;

fn ip(args: &[&str]) -> String {
    let o = Command::new("ip").args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_lab_takes_its_routes_and_leaves_the_rest() {
    lab::require_root();
    let before = ip(&["route", "show", "type", "blackhole"]);
    let foreign = format!("foreign-{}", std::process::id());
    assert!(Command::new("ip").args(["netns", "add", &foreign]).status().unwrap().success());
    let prefix;
    {
        let l = lab::Lab::up("hy", "10.238", &[], &[]);
        let during = ip(&["route", "show", "type", "blackhole"]);
        assert!(during.contains("172.30.0.0/16") && during.contains("198.18.0.0/15"), "{during}");
        prefix = format!("{}-", l.prefix);
        drop(l);
    }
    let after = ip(&["route", "show", "type", "blackhole"]);
    let namespaces = ip(&["netns", "list"]);
    let _ = Command::new("ip").args(["netns", "del", &foreign]).status();
    assert_eq!(after, before, "the lab's routes are gone, and only those");
    assert!(namespaces.contains(&foreign), "a namespace that is not the lab's stays: {namespaces}");
    assert!(!namespaces.contains(&prefix), "the lab's namespaces are gone: {namespaces}");
}

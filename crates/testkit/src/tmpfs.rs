//! A real, small file system for tests that need a full or read-only disk: a tmpfs of a given
//! size, mounted for the test and unmounted (its mount point removed) when dropped. Needs root.

use std::path::PathBuf;
use std::process::Command;

pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, such as `4k`) under the temp directory.
    pub fn mount(name: &str, size: &str) -> Tmpfs {
        let dir = std::env::temp_dir().join(format!("fabric-tmpfs-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs failed (this test needs root and CAP_SYS_ADMIN)");
        Tmpfs(dir)
    }

    /// Makes it read-only, as a disk remounted after an error is.
    pub fn read_only(&self) {
        let ok = Command::new("mount").args(["-o", "remount,ro"]).arg(&self.0).status().unwrap().success();
        assert!(ok, "remount read-only");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

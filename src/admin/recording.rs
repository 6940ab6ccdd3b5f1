//! Where a recording the operator starts goes: a new file of the mode's
//! recordings directory, named by the server (the admin API never takes a
//! path from its caller).

/// Starts a recording the operator asked for into a new file of `dir`
/// ([`new_recording_path`]) with `start`; the file's name. Without a
/// directory, says there is nowhere to write.
pub async fn start_recording_in<F, Fut, E>(
    dir: Option<&std::path::Path>,
    mode: &str,
    start: F,
) -> Result<String, String>
where
    F: FnOnce(std::path::PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let dir = dir.ok_or("no directory for recordings: start the server with --record-dir DIR")?;
    let path = new_recording_path(dir, mode).map_err(|err| format!("{}: {err}", dir.display()))?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    start(path).await.map_err(|err| err.to_string())?;
    Ok(name)
}

/// A file in `dir` (created if need be) no recording has taken yet, for a
/// recording the operator starts: `MODE-SECONDS.swrec`, with a number after
/// the seconds when one started in the same second. The admin API never
/// takes a path from its caller.
pub fn new_recording_path(
    dir: &std::path::Path,
    mode: &str,
) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (0..100)
        .map(|n| match n {
            0 => dir.join(format!("{mode}-{seconds}.swrec")),
            n => dir.join(format!("{mode}-{seconds}-{n}.swrec")),
        })
        .find(|path| !path.exists())
        .ok_or_else(|| std::io::Error::other("too many recordings this second"))
}

//! What a command writes: each stream read into a bounded capture (half from its start, half from its end, the
//! middle spilled to a file up to a cap), read back as text, and its latest whole line for progress.

use super::*;

/// One stream's output: the first half of the capture, the last half, and the bytes after the first half in a
/// file up to its cap. Memory stays at the capture's size whatever the command writes.
pub(super) struct Capture {
    pub(super) head: Vec<u8>,
    pub(super) head_max: usize,
    pub(super) tail: VecDeque<u8>,
    pub(super) tail_max: usize,
    pub(super) total: u64,
    pub(super) spill: Option<Spill>,
    pub(super) spill_max: u64,
    /// The spill file could not be written: the middle is lost, and the result says only how much.
    pub(super) spill_failed: bool,
    /// Bytes written to the spill, counted on after the spill is read back and let go.
    pub(super) spilled: u64,
}

pub(super) struct Spill {
    pub(super) file: File,
    pub(super) path: PathBuf,
    pub(super) len: u64,
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub(super) struct Page {
    pub(super) bytes: Vec<u8>,
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) skipped: u64,
}

impl Capture {
    pub(super) fn new(bytes: usize, spill_max: u64) -> Self {
        let head_max = bytes / 2;
        Capture { head: Vec::new(), head_max, tail: VecDeque::new(), tail_max: bytes - head_max, total: 0, spill: None, spill_max, spill_failed: false, spilled: 0 }
    }

    pub(super) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.head.len() < self.head_max {
            let n = chunk.len().min(self.head_max - self.head.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        if chunk.is_empty() {
            return;
        }
        // Everything past the head goes to the spill (once a byte is about to leave the tail) and to the tail.
        if self.tail.len() + chunk.len() > self.tail_max && self.spill.is_none() && !self.spill_failed && self.spill_max > 0 {
            match open_spill() {
                Ok(spill) => {
                    self.spill = Some(spill);
                    let kept: Vec<u8> = self.tail.iter().copied().collect();
                    self.write_spill(&kept);
                }
                Err(_) => self.spill_failed = true,
            }
        }
        self.write_spill(chunk);
        if chunk.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_max..]);
        } else {
            let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_max);
            self.tail.drain(..overflow);
            self.tail.extend(chunk);
        }
    }

    pub(super) fn write_spill(&mut self, bytes: &[u8]) {
        let Some(spill) = self.spill.as_mut() else { return };
        let room = self.spill_max.saturating_sub(spill.len) as usize;
        let n = bytes.len().min(room);
        if n == 0 {
            return;
        }
        // A blocking write from the reading task: it lands in the page cache, and the cap bounds it.
        if spill.file.write_all(&bytes[..n]).is_err() {
            // The file goes with what it held: those bytes are kept nowhere now.
            self.spill = None;
            self.spill_failed = true;
            self.spilled = 0;
            return;
        }
        spill.len += n as u64;
        self.spilled += n as u64;
    }

    /// Where the tail starts in the stream.
    pub(super) fn tail_from(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    /// Bytes left out of the result: between its head and its tail.
    pub(super) fn omitted(&self) -> u64 {
        self.tail_from() - self.head.len() as u64
    }

    /// Bytes kept nowhere: past what the spill could hold, before the tail.
    pub(super) fn dropped(&self) -> u64 {
        self.tail_from().saturating_sub(self.head.len() as u64 + self.spilled)
    }

    /// What the result shows: the whole output, or its head and tail around a line saying what was left out.
    pub(super) fn render(&self, artifact: Option<&str>) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let omitted = self.omitted();
        if omitted == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return clean(&all);
        }
        let dropped = self.dropped();
        let kept = match artifact {
            Some(path) if dropped == 0 => format!("; the whole output is saved in the artifact {path}"),
            Some(path) => format!("; the artifact {path} keeps the {} that follow these lines, and the {dropped} after those were not kept", omitted - dropped),
            None => String::new(),
        };
        format!("{}\n[… {omitted} bytes left out here{kept} …]\n{}", clean(cut_end(&self.head)), clean(cut_start(&tail)))
    }

    /// The stream as far as it was kept (head, spill, tail), with a line where bytes were not kept.
    pub(super) fn whole(&mut self) -> Vec<u8> {
        let mut all = self.head.clone();
        let spilled_to = self.head.len() as u64 + self.spill.as_ref().map_or(0, |s| s.len);
        if let Some(spill) = self.spill.as_mut() {
            if spill.file.seek(SeekFrom::Start(0)).is_ok() {
                let _ = (&spill.file).take(spill.len).read_to_end(&mut all);
            }
        }
        let tail_from = self.tail_from();
        if spilled_to < tail_from {
            all.extend_from_slice(format!("\n[… {} bytes not kept here …]\n", tail_from - spilled_to).as_bytes());
        }
        let skip = spilled_to.saturating_sub(tail_from) as usize;
        all.extend(self.tail.iter().skip(skip));
        all
    }

    /// Up to `limit` bytes from `offset`; bytes kept nowhere are skipped over, and the page says how many.
    pub(super) fn read(&mut self, offset: u64, limit: usize) -> Page {
        let offset = offset.min(self.total);
        let head_len = self.head.len() as u64;
        let spilled_to = head_len + self.spill.as_ref().map_or(0, |s| s.len);
        let tail_from = self.tail_from();
        let (from, skipped) = if offset < spilled_to || offset >= tail_from { (offset, 0) } else { (tail_from, tail_from - offset) };
        let mut bytes = Vec::new();
        if from < head_len {
            let end = (from as usize + limit).min(self.head.len());
            bytes.extend_from_slice(&self.head[from as usize..end]);
        } else if from < spilled_to && from < tail_from {
            if let Some(spill) = self.spill.as_mut() {
                let n = (spilled_to - from).min(limit as u64);
                if spill.file.seek(SeekFrom::Start(from - head_len)).is_ok() {
                    let _ = (&spill.file).take(n).read_to_end(&mut bytes);
                }
            }
        } else {
            let at = (from - tail_from) as usize;
            bytes.extend(self.tail.iter().skip(at).take(limit));
        }
        let to = from + bytes.len() as u64;
        Page { bytes, from, to, skipped }
    }
}

pub(super) fn open_spill() -> std::io::Result<Spill> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut tries = 0;
    loop {
        let path = std::env::temp_dir().join(format!("toolgate-output-{}-{:016x}", std::process::id(), fastrand::u64(..)));
        match options.open(&path) {
            Ok(file) => return Ok(Spill { file, path, len: 0 }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 10 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Output as text: invalid UTF-8 and NUL bytes become U+FFFD.
pub(super) fn clean(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.into_owned()
    }
}

/// The head without a character cut off at its end.
pub(super) fn cut_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// The tail without the continuation bytes of a character cut off at its start.
pub(super) fn cut_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
    &bytes[skip..]
}

pub(super) struct Streams {
    pub(super) out: Capture,
    pub(super) err: Capture,
}

impl Streams {
    pub(super) fn new(capture_bytes: usize, spill_bytes: u64) -> Self {
        Streams { out: Capture::new(capture_bytes, spill_bytes), err: Capture::new(capture_bytes, spill_bytes) }
    }

    /// What the report says of the streams: bytes written, left out of the result, kept nowhere.
    pub(super) fn count(&self, report: &mut CommandReport) {
        report.stdout_bytes = self.out.total;
        report.stderr_bytes = self.err.total;
        report.stdout_omitted_bytes = self.out.omitted();
        report.stdout_dropped_bytes = self.out.dropped();
        report.stderr_omitted_bytes = self.err.omitted();
        report.stderr_dropped_bytes = self.err.dropped();
    }
}

/// What a stream has written since its last line end: the start of a line still being written, so that a line
/// written in several chunks is reported whole, never a piece of it (which could hold a piece of a secret).
#[derive(Default)]
pub(super) struct Lines {
    pub(super) partial: Vec<u8>,
    /// The line being written grew past `LINE_MAX` and its start was let go: it is not reported.
    pub(super) overflowed: bool,
}

/// The longest line a progress report is read from, in bytes.
pub(super) const LINE_MAX: usize = 8 * 1024;

impl Lines {
    /// Takes in a chunk; with `want`, answers the latest complete line that is not blank.
    pub(super) fn push(&mut self, chunk: &[u8], want: bool) -> Option<String> {
        let is_end = |b: &u8| matches!(b, b'\n' | b'\r');
        let Some(end) = chunk.iter().rposition(is_end) else {
            self.keep(chunk);
            return None;
        };
        let complete = &chunk[..end];
        let latest = want
            .then(|| {
                complete.rsplit(is_end).find_map(|segment| {
                    // The chunk's first segment finishes the line kept from before.
                    let line = if segment.as_ptr() != complete.as_ptr() {
                        clean(segment)
                    } else if self.overflowed {
                        return None;
                    } else {
                        clean(&[self.partial.as_slice(), segment].concat())
                    };
                    (!line.trim().is_empty()).then_some(line)
                })
            })
            .flatten();
        self.partial.clear();
        self.overflowed = false;
        self.keep(&chunk[end + 1..]);
        latest
    }

    pub(super) fn keep(&mut self, bytes: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.partial.len() + bytes.len() > LINE_MAX {
            self.partial.clear();
            self.overflowed = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_keeps_head_and_tail_and_spills_the_middle() {
        let mut c = Capture::new(8, 1 << 20);
        for chunk in [b"abcd".as_slice(), b"efgh", b"ijkl", b"mnop"] {
            c.push(chunk);
        }
        assert_eq!(c.total, 16);
        assert_eq!(c.head, b"abcd");
        assert_eq!(c.tail.iter().copied().collect::<Vec<_>>(), b"mnop");
        assert_eq!(c.omitted(), 8);
        assert_eq!(c.whole(), b"abcdefghijklmnop");
        let page = c.read(6, 4);
        assert_eq!((page.bytes.as_slice(), page.from, page.to), (b"ghij".as_slice(), 6, 10));
        assert!(c.render(Some("/a")).contains("8 bytes left out here; the whole output is saved in the artifact /a"));
    }

    #[test]
    fn past_the_spill_cap_the_gap_is_named_and_paging_skips_it() {
        let mut c = Capture::new(4, 3);
        c.push(b"0123456789");
        assert_eq!(String::from_utf8(c.whole()).unwrap(), "01234\n[… 3 bytes not kept here …]\n89");
        let page = c.read(6, 10);
        assert_eq!((page.from, page.skipped, page.bytes.as_slice()), (8, 2, b"89".as_slice()));
        assert_eq!((c.omitted(), c.dropped()), (6, 3));
        assert!(c.render(Some("/a")).contains("[… 6 bytes left out here; the artifact /a keeps the 3 that follow these lines, and the 3 after those were not kept …]"));
    }

    #[test]
    fn output_is_clean_text_whatever_the_bytes() {
        assert_eq!(clean(b"a\0b\xffc"), "a\u{FFFD}b\u{FFFD}c");
        assert_eq!(cut_end("aé".as_bytes().split_at(2).0), b"a");
        assert_eq!(cut_start(&"é".as_bytes()[1..]), b"");
    }

    #[test]
    fn progress_lines_are_whole_lines_however_the_chunks_fall() {
        let mut lines = Lines::default();
        assert_eq!(lines.push(b"building", true), None, "a line not ended yet");
        assert_eq!(lines.push(b" step 1\nstep 2 of", true).as_deref(), Some("building step 1"));
        assert_eq!(lines.push(b" 3\r\n\r\n", true).as_deref(), Some("step 2 of 3"), "blank lines are passed over");
        assert_eq!(lines.push(b"a\nb\nc", false), None, "not wanted now: only kept");
        assert_eq!(lines.push(b"d\n", true).as_deref(), Some("cd"));
        let mut long = Lines::default();
        long.push(&vec![b'x'; LINE_MAX + 1], true);
        assert_eq!(long.push(b"secret-tail\nnext\n", true).as_deref(), Some("next"));
        assert_eq!(long.push(b"only-the-end-of-an-overlong-one\n", true).as_deref(), Some("only-the-end-of-an-overlong-one"), "a line begun after it is whole");
        let mut cut = Lines::default();
        cut.push(&vec![b'y'; LINE_MAX + 1], true);
        assert_eq!(cut.push(b"its-end\n", true), None, "the end of a line whose start was let go is not reported");
    }
}

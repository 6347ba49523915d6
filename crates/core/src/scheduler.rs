//! The scheduler of one turn: consecutive read-only calls run together (up to the cap); any other call waits
//! for everything before it and runs alone. It hands out input indices; results keep input order elsewhere.

use std::collections::VecDeque;

struct Group {
    waiting: VecDeque<usize>,
    concurrent: bool,
}

pub struct Schedule {
    groups: VecDeque<Group>,
    running: usize,
    concurrency: usize,
}

impl Schedule {
    /// `calls`: (input index, read-only) for every call that will run, in input order.
    pub fn new(calls: impl IntoIterator<Item = (usize, bool)>, concurrency: usize) -> Self {
        let mut schedule = Schedule { groups: VecDeque::new(), running: 0, concurrency: concurrency.max(1) };
        schedule.extend(calls);
        schedule
    }

    /// Calls that arrive after the others, in input order: a read-only call joins the read-only calls running or
    /// waiting last, a state-changing one waits for every call before it.
    pub fn extend(&mut self, calls: impl IntoIterator<Item = (usize, bool)>) {
        for (index, read_only) in calls {
            match self.groups.back_mut() {
                Some(group) if read_only && group.concurrent => group.waiting.push_back(index),
                _ => self.groups.push_back(Group { waiting: VecDeque::from([index]), concurrent: read_only }),
            }
        }
    }

    /// The calls that may start now; the caller reports each one's end with `finished`. `may_start` is asked
    /// for each candidate in input order (a tool at its own concurrency limit says no and is passed over, and
    /// takes the slot when it is next asked); it must count what it admits.
    pub fn ready(&mut self, mut may_start: impl FnMut(usize) -> bool) -> Vec<usize> {
        let mut ready = Vec::new();
        while let Some(group) = self.groups.front_mut() {
            let limit = if group.concurrent { self.concurrency } else { 1 };
            let mut position = 0;
            while self.running < limit && position < group.waiting.len() {
                let index = group.waiting[position];
                if may_start(index) {
                    group.waiting.remove(position);
                    ready.push(index);
                    self.running += 1;
                } else {
                    position += 1;
                }
            }
            if group.waiting.is_empty() && self.running == 0 {
                self.groups.pop_front();
            } else {
                break;
            }
        }
        ready
    }

    pub fn finished(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    /// Takes one call out of the schedule before it was handed out (it was answered otherwise).
    pub fn remove(&mut self, index: usize) -> bool {
        for group in self.groups.iter_mut() {
            if let Some(position) = group.waiting.iter().position(|&i| i == index) {
                group.waiting.remove(position);
                return true;
            }
        }
        false
    }

    /// Every call not started yet, removed from the schedule (the turn is ending early).
    pub fn take_waiting(&mut self) -> Vec<usize> {
        self.groups.drain(..).flat_map(|g| g.waiting).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the schedule to the end, finishing calls in start order; returns the waves of starts.
    fn waves(calls: &[(usize, bool)], concurrency: usize) -> Vec<Vec<usize>> {
        let mut s = Schedule::new(calls.iter().copied(), concurrency);
        let mut out = vec![];
        let mut running: VecDeque<usize> = VecDeque::new();
        loop {
            let ready = s.ready(|_| true);
            if !ready.is_empty() {
                running.extend(&ready);
                out.push(ready);
            }
            if running.pop_front().is_none() {
                return out;
            }
            s.finished();
        }
    }

    #[test]
    fn reads_run_together_writes_alone() {
        let calls = [(0, true), (1, true), (2, false), (3, true), (4, true), (5, true)];
        assert_eq!(waves(&calls, 8), vec![vec![0, 1], vec![2], vec![3, 4, 5]]);
    }

    #[test]
    fn concurrency_caps_a_read_batch_as_a_sliding_window() {
        let calls: Vec<_> = (0..5).map(|i| (i, true)).collect();
        assert_eq!(waves(&calls, 2), vec![vec![0, 1], vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn consecutive_writes_each_wait_for_the_one_before() {
        assert_eq!(waves(&[(0, false), (1, false)], 8), vec![vec![0], vec![1]]);
        let mut s = Schedule::new([(0, false), (1, true)], 8);
        assert_eq!(s.ready(|_| true), vec![0]);
        assert!(s.ready(|_| true).is_empty(), "the read waits until the write ends");
        s.finished();
        assert_eq!(s.ready(|_| true), vec![1]);
    }

    #[test]
    fn a_refused_candidate_is_passed_over_in_its_batch_and_taken_later() {
        let mut s = Schedule::new([(0, true), (1, true), (2, true)], 8);
        assert_eq!(s.ready(|i| i != 1), vec![0, 2]);
        assert_eq!(s.ready(|_| true), vec![1]);
        let mut w = Schedule::new([(0, false), (1, true)], 8);
        assert!(w.ready(|_| false).is_empty(), "a blocked write holds back what follows");
        assert_eq!(w.ready(|_| true), vec![0], "and it is still there to start");
    }

    #[test]
    fn a_call_removed_before_its_turn_is_never_handed_out() {
        let mut s = Schedule::new([(0, false), (1, true), (2, true)], 8);
        assert_eq!(s.ready(|_| true), vec![0]);
        assert!(s.remove(1) && !s.remove(1));
        s.finished();
        assert_eq!(s.ready(|_| true), vec![2]);
    }

    #[test]
    fn take_waiting_empties_the_schedule() {
        let mut s = Schedule::new([(0, false), (1, true), (2, true)], 8);
        assert_eq!(s.ready(|_| true), vec![0]);
        assert_eq!(s.take_waiting(), vec![1, 2]);
        s.finished();
        assert!(s.ready(|_| true).is_empty());
    }
}

//! Qt-style signals and slots for the thread that owns them.
//!
//! A [`Signal<T>`] holds any number of slots (`FnMut(&T)`); [`Signal::emit`]
//! calls each in the order they were connected. Slots run on the thread that
//! emits, which for every network object is the thread that calls its
//! `poll()`: network tasks never run game code, they queue events that `poll()`
//! turns into emissions. That is why slots need not be `Send`, and why a
//! `Signal` is not `Send` either.
//!
//! [`Signal::connect`] returns a [`SlotHandle`] (Qt's `QMetaObject::Connection`;
//! in Switchboard "connection" always means a network connection). As in
//! Qt, the slot stays
//! connected for as long as the signal lives, whether or not the
//! `SlotHandle` is kept: [`SlotHandle::disconnect`] removes it, and
//! [`SlotHandle::scoped`] turns it into a [`ScopedSlot`] that removes
//! it when dropped (a slot that lives as long as a screen or a system of the
//! game, say). Disconnecting any slot, the
//! running one included, from inside a slot is safe: a slot disconnected during
//! an emission is not called for the rest of it. A slot connected during an
//! emission first runs on the next one. A slot that re-emits the signal it is
//! running for is not called again recursively (it is skipped, with a trace).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

type Slot<T> = Rc<RefCell<dyn FnMut(&T)>>;

struct Entry<T> {
    id: u64,
    slot: Slot<T>,
    alive: Rc<Cell<bool>>,
}

struct Slots<T> {
    entries: RefCell<Vec<Entry<T>>>,
    next_id: Cell<u64>,
}

/// Type-erased access for [`SlotHandle`], which does not know `T`.
trait SlotOwner {
    fn remove(&self, id: u64);
}

impl<T> SlotOwner for Slots<T> {
    fn remove(&self, id: u64) {
        self.entries.borrow_mut().retain(|entry| entry.id != id);
    }
}

/// A signal carrying values of type `T` to its connected slots.
pub struct Signal<T: 'static> {
    slots: Rc<Slots<T>>,
}

impl<T: 'static> Default for Signal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: 'static> std::fmt::Debug for Signal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signal")
            .field("slots", &self.slot_count())
            .finish()
    }
}

impl<T: 'static> Signal<T> {
    /// A signal with no slots.
    pub fn new() -> Self {
        Self {
            slots: Rc::new(Slots {
                entries: RefCell::new(Vec::new()),
                next_id: Cell::new(0),
            }),
        }
    }

    /// Connects `slot`; it runs on every later [`emit`](Self::emit) until it
    /// is disconnected (through the returned [`SlotHandle`]) or the signal
    /// is dropped.
    pub fn connect(&self, slot: impl FnMut(&T) + 'static) -> SlotHandle {
        let id = self.slots.next_id.get();
        self.slots.next_id.set(id + 1);
        let alive = Rc::new(Cell::new(true));
        self.slots.entries.borrow_mut().push(Entry {
            id,
            slot: Rc::new(RefCell::new(slot)),
            alive: alive.clone(),
        });
        let owner: Rc<dyn SlotOwner> = self.slots.clone();
        SlotHandle {
            owner: Rc::downgrade(&owner),
            id,
            alive,
        }
    }

    /// Calls every connected slot with `value`, in connection order.
    pub fn emit(&self, value: &T) {
        // Snapshot so that slots may connect or disconnect while we iterate.
        let snapshot: Vec<(Slot<T>, Rc<Cell<bool>>)> = self
            .slots
            .entries
            .borrow()
            .iter()
            .map(|entry| (entry.slot.clone(), entry.alive.clone()))
            .collect();
        for (slot, alive) in snapshot {
            if !alive.get() {
                continue;
            }
            match slot.try_borrow_mut() {
                Ok(mut slot) => slot(value),
                Err(_) => tracing::trace!("slot re-entered through its own signal; skipped"),
            };
        }
    }

    /// How many slots are connected.
    pub fn slot_count(&self) -> usize {
        self.slots.entries.borrow().len()
    }

    /// Disconnects every slot.
    pub fn disconnect_all(&self) {
        let entries = std::mem::take(&mut *self.slots.entries.borrow_mut());
        for entry in entries {
            entry.alive.set(false);
        }
    }
}

/// The link between a signal and one slot. Dropping it leaves the slot
/// connected; [`disconnect`](Self::disconnect) removes it, and
/// [`scoped`](Self::scoped) ties the slot's life to a guard.
pub struct SlotHandle {
    owner: Weak<dyn SlotOwner>,
    id: u64,
    alive: Rc<Cell<bool>>,
}

impl std::fmt::Debug for SlotHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotHandle")
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl SlotHandle {
    /// Whether the slot is still connected (false once disconnected, or once
    /// the signal is gone).
    pub fn is_connected(&self) -> bool {
        self.alive.get() && self.owner.strong_count() > 0
    }

    /// Removes the slot. It will not run again, even later in an emission
    /// that is under way.
    pub fn disconnect(&self) {
        self.alive.set(false);
        if let Some(owner) = self.owner.upgrade() {
            owner.remove(self.id);
        }
    }

    /// A guard that disconnects the slot when it is dropped.
    pub fn scoped(self) -> ScopedSlot {
        ScopedSlot(self)
    }
}

/// A [`SlotHandle`] that disconnects its slot when dropped.
#[must_use = "dropping a ScopedSlot disconnects its slot at once"]
#[derive(Debug)]
pub struct ScopedSlot(SlotHandle);

impl ScopedSlot {
    /// The handle inside.
    pub fn handle(&self) -> &SlotHandle {
        &self.0
    }
}

impl Drop for ScopedSlot {
    fn drop(&mut self) {
        self.0.disconnect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_run_in_connection_order() {
        let signal = Signal::<u32>::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let (a, b) = (log.clone(), log.clone());
        let _ca = signal.connect(move |v| a.borrow_mut().push(("a", *v)));
        let _cb = signal.connect(move |v| b.borrow_mut().push(("b", *v)));
        signal.emit(&1);
        signal.emit(&2);
        assert_eq!(*log.borrow(), [("a", 1), ("b", 1), ("a", 2), ("b", 2)]);
    }

    #[test]
    fn dropping_a_scoped_connection_disconnects() {
        let signal = Signal::<()>::new();
        let hits = Rc::new(Cell::new(0));
        let h = hits.clone();
        let conn = signal.connect(move |_| h.set(h.get() + 1)).scoped();
        signal.emit(&());
        drop(conn);
        signal.emit(&());
        assert_eq!(hits.get(), 1);
        assert_eq!(signal.slot_count(), 0);
    }

    #[test]
    fn dropped_connection_leaves_the_slot_connected() {
        let signal = Signal::<()>::new();
        let hits = Rc::new(Cell::new(0));
        let h = hits.clone();
        signal.connect(move |_| h.set(h.get() + 1));
        signal.emit(&());
        signal.emit(&());
        assert_eq!(hits.get(), 2);
    }

    #[test]
    fn disconnect_another_slot_during_emit() {
        let signal = Signal::<()>::new();
        let second_ran = Rc::new(Cell::new(false));
        let victim: Rc<RefCell<Option<SlotHandle>>> = Rc::new(RefCell::new(None));
        let v = victim.clone();
        let _first = signal.connect(move |_| {
            if let Some(conn) = v.borrow().as_ref() {
                conn.disconnect();
            }
        });
        let ran = second_ran.clone();
        *victim.borrow_mut() = Some(signal.connect(move |_| ran.set(true)));
        signal.emit(&());
        assert!(
            !second_ran.get(),
            "a slot disconnected mid-emit must not run"
        );
        assert!(!victim.borrow().as_ref().unwrap().is_connected());
        assert_eq!(signal.slot_count(), 1);
    }

    #[test]
    fn slot_disconnects_itself_during_emit() {
        let signal = Signal::<()>::new();
        let hits = Rc::new(Cell::new(0));
        let me: Rc<RefCell<Option<ScopedSlot>>> = Rc::new(RefCell::new(None));
        let (h, m) = (hits.clone(), me.clone());
        *me.borrow_mut() = Some(
            signal
                .connect(move |_| {
                    h.set(h.get() + 1);
                    m.borrow_mut().take(); // drops our own scoped connection
                })
                .scoped(),
        );
        signal.emit(&());
        signal.emit(&());
        assert_eq!(hits.get(), 1);
        assert_eq!(signal.slot_count(), 0);
    }

    #[test]
    fn slot_connected_during_emit_runs_next_time() {
        let signal = Rc::new(Signal::<()>::new());
        let late_hits = Rc::new(Cell::new(0));
        let keep: Rc<RefCell<Vec<SlotHandle>>> = Rc::new(RefCell::new(Vec::new()));
        let (s, l, k) = (Rc::downgrade(&signal), late_hits.clone(), keep.clone());
        let _adder = signal.connect(move |_| {
            if k.borrow().is_empty() {
                let l = l.clone();
                let conn = s.upgrade().unwrap().connect(move |_| l.set(l.get() + 1));
                k.borrow_mut().push(conn);
            }
        });
        signal.emit(&());
        assert_eq!(late_hits.get(), 0);
        signal.emit(&());
        assert_eq!(late_hits.get(), 1);
    }

    #[test]
    fn recursive_emit_skips_the_running_slot() {
        let signal = Rc::new(Signal::<u32>::new());
        let seen = Rc::new(RefCell::new(Vec::new()));
        let (s, log) = (Rc::downgrade(&signal), seen.clone());
        let _c = signal.connect(move |v| {
            log.borrow_mut().push(*v);
            if *v == 0 {
                s.upgrade().unwrap().emit(&1);
            }
        });
        signal.emit(&0);
        assert_eq!(*seen.borrow(), [0]);
    }

    #[test]
    fn connection_outliving_signal_is_harmless() {
        let signal = Signal::<()>::new();
        let conn = signal.connect(|_| {});
        drop(signal);
        assert!(!conn.is_connected());
        conn.disconnect();
    }
}

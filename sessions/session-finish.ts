// Finishing a session (POST /sessions/{id}/abort, docs/http.md "Aborting a session"): it
// takes no more turns. The flag is set at once, so a turn committing while the store
// writes it sees it and does not commit; the store keeps it (a FINISH journal entry), so
// a worker restart keeps it; a write that fails undoes it and the caller hears the error.
import type { RecordStore } from "./journal/records.ts";
import type { Trajectory } from "./trajectory.ts";

export async function finishSession(t: Trajectory, records: RecordStore): Promise<void> {
  if (t.finished) return;
  t.finished = true;
  try {
    await records.finish(t.id);
  } catch (err) {
    t.finished = false;
    throw err;
  }
}

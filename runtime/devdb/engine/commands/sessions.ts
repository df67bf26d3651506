// Sessions. Retried writes are recognised by (lsid, txnNumber) — see ../retryable.ts;
// a transaction's statements, commit and abort (autocommit: false) are run by
// ../transactions.ts before they reach a handler. Ending or killing a session
// forgets its records and aborts its open transaction. commitTransaction and
// abortTransaction without a transaction's fields are answered ok.
import { UUID } from 'bson';
import type { Handler } from '../context.ts';

const ok: Handler = () => ({ ok: 1 });

const startSession: Handler = () => ({
  id: { id: new UUID() },
  timeoutMinutes: 30,
  ok: 1,
});

const endSessions: Handler = (cmd, ctx) => {
  const lsids = cmd[Object.keys(cmd)[0]];
  ctx.retryableWrites.forget(lsids);
  ctx.transactions.forget(lsids);
  return { ok: 1 };
};

// devdb has no users to match patterns against: killing "all" forgets every session.
const killAll: Handler = (_cmd, ctx) => {
  ctx.retryableWrites.reset();
  ctx.transactions.abortAll();
  return { ok: 1 };
};

export const sessionCommands: Record<string, Handler> = {
  startSession,
  endSessions,
  killSessions: endSessions,
  killAllSessions: killAll,
  killAllSessionsByPattern: killAll,
  refreshSessions: ok,
  commitTransaction: ok,
  abortTransaction: ok,
};

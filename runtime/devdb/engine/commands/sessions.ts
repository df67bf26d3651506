// Sessions and transactions. devdb has NO isolation and NO atomicity across
// operations: transaction commands are accepted (ok: 1) so drivers work, but
// every write is applied immediately and abortTransaction does not roll back.
// Retried writes are recognised by (lsid, txnNumber) — see ../retryable.ts;
// ending or killing a session forgets its record.
import { UUID } from 'bson';
import type { Handler } from '../context.ts';

const ok: Handler = () => ({ ok: 1 });

const startSession: Handler = () => ({
  id: { id: new UUID() },
  timeoutMinutes: 30,
  ok: 1,
});

const endSessions: Handler = (cmd, ctx) => {
  ctx.retryableWrites.forget(cmd[Object.keys(cmd)[0]]);
  return { ok: 1 };
};

// devdb has no users to match patterns against: killing "all" forgets every session.
const killAll: Handler = (_cmd, ctx) => {
  ctx.retryableWrites.reset();
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

// Sessions and transactions. devdb has NO isolation and NO atomicity across
// operations: transaction commands are accepted (ok: 1) so drivers work, but
// every write is applied immediately and abortTransaction does not roll back.
import { UUID } from 'bson';
import type { Handler } from '../context.ts';

const ok: Handler = () => ({ ok: 1 });

const startSession: Handler = () => ({
  id: { id: new UUID() },
  timeoutMinutes: 30,
  ok: 1,
});

export const sessionCommands: Record<string, Handler> = {
  startSession,
  endSessions: ok,
  killSessions: ok,
  killAllSessions: ok,
  killAllSessionsByPattern: ok,
  refreshSessions: ok,
  commitTransaction: ok,
  abortTransaction: ok,
};

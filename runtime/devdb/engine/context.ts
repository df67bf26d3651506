// Per-call command context handed to every command handler.
import type { Document } from 'bson';
import type { CursorManager } from './cursors.ts';
import type { RetryableWrites } from './retryable.ts';
import type { Store } from './store.ts';
import type { Transactions } from './transactions.ts';

export interface EngineState {
  store: Store;
  cursors: CursorManager;
  /** Last txnNumber and reply per logical session, for retried writes (see retryable.ts). */
  retryableWrites: RetryableWrites;
  /** Each session's transaction and its undo log (see transactions.ts). */
  transactions: Transactions;
  startedAt: number;
  now: () => number;
}

export interface Ctx extends EngineState {
  db: string;
  connectionId: number;
}

export type Handler = (cmd: Document, ctx: Ctx) => Document;

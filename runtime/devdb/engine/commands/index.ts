// Command registry: name (including mongod's aliases) -> handler.
import type { Handler } from '../context.ts';
import { adminCommands } from './admin.ts';
import { aggregateCommands } from './aggregate.ts';
import { ddlCommands } from './ddl.ts';
import { readCommands } from './read.ts';
import { sessionCommands } from './sessions.ts';
import { writeCommands } from './write.ts';

export const commands: Record<string, Handler> = Object.assign(
  Object.create(null) as Record<string, Handler>,
  adminCommands,
  sessionCommands,
  ddlCommands,
  readCommands,
  writeCommands,
  aggregateCommands,
);

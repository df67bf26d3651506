// Event sinks that need no channels: the one a proxy uses until notifications are configured (it
// logs each event) and the one tests read. Delivery to channels lives in notify/.
import type { CanaryEvent, CanaryEventSink, NotificationChannel } from './events.ts';

export class LogEventSink implements CanaryEventSink {
  private readonly log: (msg: string, fields: Record<string, unknown>) => void;
  constructor(log: (msg: string, fields: Record<string, unknown>) => void) {
    this.log = log;
  }
  emit(event: CanaryEvent): void {
    this.log('canary event', { id: event.id, type: event.type, canary_id: event.canary_id, pipeline_id: event.pipeline_id, stage: event.stage,
      traffic_pct: event.traffic_pct });
  }
  async close(): Promise<void> {}
}

/** Keeps every event (and the channels it was given) in order. */
export class RecordingEventSink implements CanaryEventSink {
  readonly events: Array<{ event: CanaryEvent; channels: NotificationChannel[] | null }> = [];
  emit(event: CanaryEvent, channels: NotificationChannel[] | null): void {
    this.events.push({ event, channels });
  }
  types(): string[] {
    return this.events.map((e) => e.event.type);
  }
  async close(): Promise<void> {}
}

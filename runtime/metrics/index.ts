export { METRICS, SERVER_STAT_FIELDS, newServerStats, promOptions, expositionHeader, type MetricName, type MetricSpec, type MetricType,
  type MetricOwner, type ServerStats, type ServerStatField } from './table.ts';

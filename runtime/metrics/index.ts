export { METRICS, newServerStats, promOptions, expositionHeader, type MetricName, type MetricSpec, type MetricType, type MetricOwner, type ServerStats, type ServerStatField } from './table.ts';

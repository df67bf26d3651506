export { proxyMetricsRegistry } from './proxy-metrics.ts';

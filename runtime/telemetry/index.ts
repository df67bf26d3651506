export { proxyMetricsRegistry, metricsText } from './proxy-metrics.ts';

-- The store's tables as the release that wrote SCHEMA_VERSION 5 created them (commit 9b4970c, postgresql):
-- made with SQLAlchemy's CreateTable / CreateIndex over that release's schemas/*tables.py, as its
-- metadata.create_all ran them. Statements end with a line holding only ';'.
CREATE TABLE alert_deliveries (
	id BIGSERIAL NOT NULL, 
	webhook_id VARCHAR(64) NOT NULL, 
	route VARCHAR(100) NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	group_key VARCHAR(1000) NOT NULL, 
	format VARCHAR(16) NOT NULL, 
	body TEXT NOT NULL, 
	alert_count INTEGER NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	attempts INTEGER NOT NULL, 
	failures INTEGER NOT NULL, 
	created_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	next_attempt_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	claimed_until TIMESTAMP WITH TIME ZONE, 
	claimed_by VARCHAR(100), 
	first_attempt_at TIMESTAMP WITH TIME ZONE, 
	last_attempt_at TIMESTAMP WITH TIME ZONE, 
	last_status_code INTEGER, 
	last_error VARCHAR(500), 
	finished_at TIMESTAMP WITH TIME ZONE, 
	PRIMARY KEY (id), 
	UNIQUE (webhook_id)
)
;
CREATE INDEX ix_alert_deliveries_due ON alert_deliveries (status, next_attempt_at)
;
CREATE TABLE alert_endpoints (
	route VARCHAR(100) NOT NULL, 
	disabled_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	reason VARCHAR(500) NOT NULL, 
	PRIMARY KEY (route)
)
;
CREATE TABLE alert_events (
	id BIGSERIAL NOT NULL, 
	fingerprint VARCHAR(32) NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	feature VARCHAR(200) NOT NULL, 
	segment VARCHAR(500) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	severity VARCHAR(16) NOT NULL, 
	window_start TIMESTAMP WITH TIME ZONE NOT NULL, 
	at TIMESTAMP WITH TIME ZONE NOT NULL, 
	PRIMARY KEY (id)
)
;
CREATE INDEX ix_alert_events_model_time ON alert_events (model, window_start)
;
CREATE TABLE alert_groups (
	route VARCHAR(100) NOT NULL, 
	group_key VARCHAR(1000) NOT NULL, 
	last_sealed_at TIMESTAMP WITH TIME ZONE, 
	PRIMARY KEY (route, group_key)
)
;
CREATE TABLE alert_models (
	model VARCHAR(200) NOT NULL, 
	last_window_start TIMESTAMP WITH TIME ZONE NOT NULL, 
	last_seen_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	PRIMARY KEY (model)
)
;
CREATE TABLE alert_notify (
	id BIGSERIAL NOT NULL, 
	route VARCHAR(100) NOT NULL, 
	group_key VARCHAR(1000) NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	fingerprint VARCHAR(32) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	severity VARCHAR(16) NOT NULL, 
	alert TEXT NOT NULL, 
	version INTEGER NOT NULL, 
	pending BOOLEAN NOT NULL, 
	told_firing BOOLEAN NOT NULL, 
	changed_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	delivery_id BIGINT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_alert_notify UNIQUE (route, fingerprint)
)
;
CREATE INDEX ix_alert_notify_group ON alert_notify (route, group_key, pending)
;
CREATE TABLE alert_schema (
	id SERIAL NOT NULL, 
	version INTEGER NOT NULL, 
	PRIMARY KEY (id)
)
;
CREATE TABLE alert_silences (
	id BIGSERIAL NOT NULL, 
	matchers TEXT NOT NULL, 
	starts_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	ends_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	created_by VARCHAR(200) NOT NULL, 
	comment VARCHAR(1000) NOT NULL, 
	PRIMARY KEY (id)
)
;
CREATE TABLE alerts (
	id BIGSERIAL NOT NULL, 
	fingerprint VARCHAR(32) NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	feature VARCHAR(200) NOT NULL, 
	segment VARCHAR(500) NOT NULL, 
	severity VARCHAR(16) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	starts_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	ends_at TIMESTAMP WITH TIME ZONE, 
	last_window_start TIMESTAMP WITH TIME ZONE NOT NULL, 
	last_window_end TIMESTAMP WITH TIME ZONE NOT NULL, 
	clean_windows INTEGER NOT NULL, 
	version INTEGER NOT NULL, 
	migrated BOOLEAN NOT NULL, 
	acked_at TIMESTAMP WITH TIME ZONE, 
	acked_by VARCHAR(200), 
	details TEXT NOT NULL, 
	updated_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (fingerprint)
)
;
CREATE INDEX ix_alerts_model_status ON alerts (model, status)
;
CREATE TABLE dead_letters (
	id BIGSERIAL NOT NULL, 
	topic VARCHAR(250) NOT NULL, 
	partition INTEGER NOT NULL, 
	"offset" BIGINT NOT NULL, 
	reason VARCHAR(200) NOT NULL, 
	detail TEXT, 
	model VARCHAR(200), 
	event_time TIMESTAMP WITH TIME ZONE, 
	payload TEXT NOT NULL, 
	seen_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_dead_letters UNIQUE (topic, partition, "offset")
)
;
CREATE TABLE latency_runs (
	id BIGSERIAL NOT NULL, 
	run_id VARCHAR(32) NOT NULL, 
	created_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	baseline VARCHAR(500) NOT NULL, 
	candidate VARCHAR(500) NOT NULL, 
	baseline_sha256 VARCHAR(64), 
	candidate_sha256 VARCHAR(64), 
	device VARCHAR(200) NOT NULL, 
	batch_size INTEGER NOT NULL, 
	dtype VARCHAR(8) NOT NULL, 
	model_role VARCHAR(16) NOT NULL, 
	inputs VARCHAR(16) NOT NULL, 
	requests BIGINT NOT NULL, 
	p50_ms FLOAT, 
	p90_ms FLOAT, 
	p95_ms FLOAT, 
	p99_ms FLOAT, 
	p999_ms FLOAT, 
	mean_ms FLOAT, 
	samples_per_s FLOAT, 
	j_per_sample FLOAT, 
	model_ratio_p50 FLOAT, 
	model_ratio_p50_ci_low FLOAT, 
	model_ratio_p50_ci_high FLOAT, 
	model_ratio_p99 FLOAT, 
	model_ratio_p99_ci_low FLOAT, 
	model_ratio_p99_ci_high FLOAT, 
	cell_verdict VARCHAR(32) NOT NULL, 
	attribution VARCHAR(32) NOT NULL, 
	run_verdict VARCHAR(32) NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_latency_runs UNIQUE (run_id, batch_size, dtype, model_role, inputs)
)
;
CREATE TABLE schema_info (
	id SERIAL NOT NULL, 
	version INTEGER NOT NULL, 
	PRIMARY KEY (id)
)
;
CREATE TABLE segment_results (
	id BIGSERIAL NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	feature VARCHAR(200) NOT NULL, 
	window_start TIMESTAMP WITH TIME ZONE NOT NULL, 
	window_end TIMESTAMP WITH TIME ZONE NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	count BIGINT NOT NULL, 
	missing BIGINT NOT NULL, 
	gate_ks FLOAT, 
	gate_ks_bound FLOAT, 
	gate_psi FLOAT, 
	gate_emd FLOAT, 
	gate_chi2 FLOAT, 
	gate_js FLOAT, 
	gate_new_share FLOAT, 
	gate_missing_delta FLOAT, 
	gate_alarm BOOLEAN NOT NULL, 
	deep_ks_stat FLOAT, 
	deep_ks_pvalue FLOAT, 
	deep_psi FLOAT, 
	deep_emd FLOAT, 
	deep_chi2_stat FLOAT, 
	deep_chi2_pvalue FLOAT, 
	p_adjusted FLOAT, 
	drifted BOOLEAN NOT NULL, 
	severity VARCHAR(16) NOT NULL, 
	computed_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	evidence TEXT, 
	cusum_up FLOAT, 
	cusum_down FLOAT, 
	segment VARCHAR(500) NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_segment_results UNIQUE (model, feature, segment, window_start)
)
;
CREATE TABLE window_counts (
	id BIGSERIAL NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	window_start TIMESTAMP WITH TIME ZONE NOT NULL, 
	window_end TIMESTAMP WITH TIME ZONE NOT NULL, 
	events BIGINT NOT NULL, 
	late BIGINT NOT NULL, 
	unknown_features BIGINT NOT NULL, 
	deep_checked BOOLEAN NOT NULL, 
	computed_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_window_counts UNIQUE (model, window_start)
)
;
CREATE TABLE window_results (
	id BIGSERIAL NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	feature VARCHAR(200) NOT NULL, 
	window_start TIMESTAMP WITH TIME ZONE NOT NULL, 
	window_end TIMESTAMP WITH TIME ZONE NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	count BIGINT NOT NULL, 
	missing BIGINT NOT NULL, 
	gate_ks FLOAT, 
	gate_ks_bound FLOAT, 
	gate_psi FLOAT, 
	gate_emd FLOAT, 
	gate_chi2 FLOAT, 
	gate_js FLOAT, 
	gate_new_share FLOAT, 
	gate_missing_delta FLOAT, 
	gate_alarm BOOLEAN NOT NULL, 
	deep_ks_stat FLOAT, 
	deep_ks_pvalue FLOAT, 
	deep_psi FLOAT, 
	deep_emd FLOAT, 
	deep_chi2_stat FLOAT, 
	deep_chi2_pvalue FLOAT, 
	p_adjusted FLOAT, 
	drifted BOOLEAN NOT NULL, 
	severity VARCHAR(16) NOT NULL, 
	computed_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	evidence TEXT, 
	cusum_up FLOAT, 
	cusum_down FLOAT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_window_results UNIQUE (model, feature, window_start)
)
;
CREATE TABLE window_summaries (
	id BIGSERIAL NOT NULL, 
	model VARCHAR(200) NOT NULL, 
	window_start BIGINT NOT NULL, 
	summary BYTEA NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_window_summaries UNIQUE (model, window_start)
)
;

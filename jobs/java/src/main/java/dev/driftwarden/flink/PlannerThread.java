package dev.driftwarden.flink;

import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.internal.TableEnvironmentImpl;

/**
 * Runs a SQL statement on the calling thread with the planner's Calcite metadata provider seeded there.
 *
 * <p>Calcite keeps that provider in a thread-local ({@code RelMetadataQueryBase.THREAD_PROVIDERS}),
 * which Flink sets only on the thread that created the planner's cluster. PyFlink reaches the JVM
 * through py4j, which serves a call on whichever of its connection threads is free: when the Python
 * side once made two calls at a time (a second thread, or a finalizer releasing a Java object), a
 * later statement can be planned on a thread that never had the provider, and the planner fails with
 * {@code NullPointerException: metadataHandlerProvider} (FLINK-23020). Seeding the thread in the same
 * JVM call as the statement closes that window. An earlier statement served on such a thread (a
 * {@code CREATE VIEW ... AS SELECT}) leaves the planner's cluster holding a metadata query made without
 * the provider, which the next statement would use wherever it runs: the cluster's cached query is
 * dropped too, so this statement makes its own on the seeded thread. The planner lives in its own class
 * loader ({@code flink-table-planner-loader}), so its classes are reached by reflection through it.
 *
 * <p>Python holds an instance (made while this jar is on the context class loader) and calls its
 * method: a call on an object needs no class lookup by name on the serving thread, whose context
 * class loader may not have this jar.
 */
public final class PlannerThread {
    private static final String PACKAGE = "org.apache.calcite.rel.metadata.";

    /** {@code env.executeSql(statement)}, with this thread's metadata provider seeded first. */
    public TableResult executeSql(TableEnvironment env, String statement) {
        seed(env);
        return env.executeSql(statement);
    }

    /**
     * Sets Calcite's thread-local metadata provider on this thread to Flink's, as the planner's cluster does,
     * and drops the metadata query the cluster cached (it may have been made on a thread without one).
     */
    @SuppressWarnings("unchecked")
    static void seed(TableEnvironment env) {
        Object plannerBase = ((TableEnvironmentImpl) env).getPlanner();
        ClassLoader planner = plannerBase.getClass().getClassLoader();
        try {
            Class<?> providerType = Class.forName(PACKAGE + "RelMetadataProvider", true, planner);
            Object flink = Class.forName("org.apache.flink.table.planner.plan.metadata.FlinkDefaultRelMetadataProvider",
                    true, planner).getMethod("INSTANCE").invoke(null);
            Object janino = Class.forName(PACKAGE + "JaninoRelMetadataProvider", true, planner)
                    .getMethod("of", providerType).invoke(null, flink);
            ThreadLocal<Object> providers = (ThreadLocal<Object>) Class.forName(PACKAGE + "RelMetadataQueryBase", true,
                    planner).getField("THREAD_PROVIDERS").get(null);
            providers.set(janino);
            Object context = plannerBase.getClass().getMethod("plannerContext").invoke(plannerBase);
            Object cluster = context.getClass().getMethod("getCluster").invoke(context);
            cluster.getClass().getMethod("invalidateMetadataQuery").invoke(cluster);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot seed the planner's metadata provider on this thread "
                    + "(Flink's planner classes changed?)", e);
        }
    }
}

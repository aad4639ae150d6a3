"""The pipeline layer: what the live job, replay, ``reference build`` and notebooks share.

Built on ``sketches/`` (the statistics) and the bottom layer; imports neither Flink nor Kafka. Each
rule is one function here, called by every path (``docs/architecture.md`` has the map):

* ``validation``: whether a raw record is valid, and its monitored values (:func:`validate_record`);
* ``event_time``, ``windowing``: the window, future-clock and late rules, and the windows replay and
  the front door keep by them (the live job's twin is Java ``EventTimeRules``);
* ``summary``: window summaries (built from validated events, serialized, merged);
* ``references``, ``window_store``, ``reference_set``, ``reference_build``: which reference a window is
  judged against, where warm-up and rolling windows are kept, reference files, building one;
* ``judging``: judging one window against its reference (:func:`judging.judge_window`);
* ``columns``, ``segments``: a record's configured values as columns, and its segment;
* ``dead_letters``, ``results``: the rows a rejected record and a judged window leave in the store.
"""

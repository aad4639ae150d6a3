"""The pipeline layer: what the live job, replay, ``reference build`` and notebooks share.

Built on ``sketches/`` (the statistics) and the bottom layer; imports neither Flink nor Kafka.

* ``summary``: window summaries (built from validated events, serialized, merged);
* ``judging``: judging one window against its reference (:func:`pipeline.judging.analyze_summary`);
* ``references``, ``reference_build``: reference files, warm-up and rolling references, building one;
* ``columns``, ``segments``: a record's configured values as columns, and its segment;
* ``dead_letters``, ``results``: the rows a rejected record and a judged window leave in the store.
"""

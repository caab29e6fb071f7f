"""The page's plumbing: the server's sessions and memory, the periodic callback that
plays a run (:mod:`.playback`) and its fair frame rate (:mod:`.pacing`), the URL state,
the data files of ``assets/`` and KaTeX offline."""

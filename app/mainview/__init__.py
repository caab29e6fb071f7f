"""The main tab: the sidebar of controls and the plots of one run — the attention maps
(:mod:`.heatmaps`), the time series of lag and energy (:mod:`.timeseries`, with the tour's
guides), the tokens' trajectories and clustering, real heads, the equations of the model
(:mod:`.explain`) and the run's export."""

"""What a lecture needs: the guided tour, slides of the current view, projector mode,
pinned runs to compare against, and the Theory page."""

"""Parks and what wakes them: ``conditions`` parses and checks a park's wake conditions when the
park is planned and evaluates them later; ``wake`` notices them, journals the wake and, for an
``auto_resume`` park, resumes the work (as ``system``)."""

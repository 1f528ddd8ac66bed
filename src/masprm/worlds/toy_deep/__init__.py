"""The deep toy world (``--dataset toy_deep``): longer stories, eight agents, errors that compound."""
